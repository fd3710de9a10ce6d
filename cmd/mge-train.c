/* mge-train — train a model (text or .mge) on a dataset and write the
 * trained .mge: forward, backward and optimizer update run as one planned
 * graph (lib/train.c); checkpoints are atomic and resumable. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "train_dist.h"
#include "train_loss.h"
#include "train_report.h"
#include "weights.h"

static void help(void)
{
    printf("Usage: %s NET [options] -o OUT.mge\n"
           "Train NET (text form, .mge or .onnx, with a `minimize` loss or --loss) and write the trained model.\n"
           "\n"
           "Loss (for a model without one, such as an ONNX export: only its forward pass):\n"
           "      --precision P     f32 or bf16: bf16 mixed precision (dense conv2d, linear, matmul and\n"
           "                        attention multiply in bf16, forward and backward; weights, sums and the\n"
           "                        optimizer stay f32; on AMX or AVX512-BF16, else computed in f32)\n"
           "      --loss L          add loss L over an output: cross_entropy (logits [N,C] with i32 class\n"
           "                        indices [N]) or mse (a target like the output)\n"
           "      --label-input NAME  the new input the label arrives in (default label), after the others\n"
           "      --loss-output NAME  the output the loss is over (default the first; ONNX names work)\n"
           "Data:\n"
           "      --data D          training data: fashion-mnist[:test], an IDX directory or prefix\n"
           "                        (gzipped or not), a .npz named after the inputs, an NPY stream\n"
           "                        (records in input order; - is stdin), or a tar/zip of NPY files\n"
           "      --val V           validation data (same forms)\n"
           "      --val-split F     hold out the fraction F of --data for validation (when no --val)\n"
           "      --batch B         batch size (default 64)\n"
           "      --drop-last       drop a final partial batch\n"
           "      --no-shuffle      keep the data order\n"
           "      --normalize M,S   u8 images: (x/255 - M) / S\n"
           "      --no-prefetch     gather batches on the training thread\n"
           "Length:\n"
           "      --epochs E        passes over the data (default 1)\n"
           "      --steps S         optimizer steps instead of epochs\n"
           "Optimizer:\n"
           "      --optimizer O     sgd, adam or adamw (default sgd)\n"
           "      --lr LR           learning rate (default: sgd 0.01, adam/adamw 0.001)\n"
           "      --momentum M      sgd momentum (default 0)\n"
           "      --dampening D     sgd dampening (default 0)\n"
           "      --nesterov        sgd Nesterov momentum\n"
           "      --betas B1,B2     adam/adamw (default 0.9,0.999)\n"
           "      --eps E           adam/adamw (default 1e-08)\n"
           "      --weight-decay W  L2 penalty (sgd, adam; default 0) or decoupled decay (adamw; default 0.01)\n"
           "      --schedule S      constant, step:EVERY[:GAMMA], cosine[:MIN_LR] (per step; default constant)\n"
           "      --warmup N        linear learning-rate warm-up over the first N steps\n"
           "      --clip-norm C     clip gradients to global L2 norm C\n"
           "State:\n"
           "      --seed S          parameter init, data order and dropout (default 0)\n"
           "      --weights W.npz   initial parameter values by name (params it lacks keep their init)\n"
           "      --allow-unused    entries of --weights the model has no value for are a warning\n"
           "      --resume CKPT     continue from a checkpoint written by mge-train\n"
           "      --checkpoint-every N  write OUT every N steps (atomically)\n"
           "      --no-state        leave the optimizer state out of OUT (not resumable)\n"
           "      --log FILE        metrics per step and per epoch, .jsonl or .csv\n"
           "  -o FILE               the trained model (.mge)\n"
           "  -f, --force           write binary output to a terminal\n"
           "  -q, --quiet           only errors\n"
           "  -v, --verbose         epoch summaries even when stderr is not a terminal\n"
           "      --threads N       worker threads (default: all CPUs; under MPI, shared by the ranks of a machine)\n"
           "      --device DEV      cpu (default), sim (simulated device), cuda[:N] (plugin)\n"
           "Distributed (data parallel, under an MPI launcher: mpirun -np N mge-train ...):\n"
           "      --bucket-mb M     gradients summed over the ranks in buckets of about M MiB (default 25)\n"
           "      --comm-timeout S  a rank that waits S seconds for the others fails (default 300)\n"
           "      --check-sync      compare a hash of the parameters across ranks after every step\n"
           "      --sync-bn         batchnorm statistics over the global batch (default: per rank)\n"
           "  each rank gathers only its rows of a global batch, and reads only those of an\n"
           "  uncompressed .npy --data (other formats are read whole)\n"
           "  -h, --help            show this help and exit\n"
           "      --version         show the version and exit\n"
           "\n"
           "A step that makes a parameter NaN or inf stops the run; OUT then holds the step before it.\n"
           "Under MPI, --batch is per rank (the global batch is N*B), every rank trains on its share of\n"
           "each global batch, and rank 0 alone writes OUT, checkpoints, the log and the progress:\n"
           "  mpirun -np 2 mge-train net.mgt --data d.npz --batch 32 -o net.mge   (global batch 64)\n"
           "Exit status: 0 success, 1 failure, 2 usage error (also a number out of range).\n"
           "\n"
           "Examples:\n"
           "  mge-train net.mgt --data d.npz --epochs 2 -o net.mge\n"
           "  mge-train net.mgt --data d.npz --val-split 0.25 --optimizer adam --log run.csv -o net.mge\n"
           "  mge-train net.mgt --data d.npz --weights w.npz --steps 20 -o tuned.mge   # start from weights\n",
           cli_prog);
}

enum {
    OPT_DATA = CLI_OPT_FIRST_TOOL, OPT_VAL, OPT_VAL_SPLIT, OPT_BATCH, OPT_DROP_LAST, OPT_NO_SHUFFLE, OPT_NORMALIZE,
    OPT_NO_PREFETCH, OPT_EPOCHS, OPT_STEPS, OPT_OPTIMIZER, OPT_LR, OPT_MOMENTUM, OPT_DAMPENING, OPT_NESTEROV,
    OPT_BETAS, OPT_EPS, OPT_WD, OPT_SCHEDULE, OPT_WARMUP, OPT_CLIP, OPT_SEED, OPT_WEIGHTS, OPT_RESUME, OPT_CKPT,
    OPT_NO_STATE, OPT_LOG, OPT_ALLOW_UNUSED, OPT_BUCKET_MB, OPT_COMM_TIMEOUT, OPT_CHECK_SYNC, OPT_SYNC_BN,
    OPT_LOSS, OPT_LABEL_INPUT, OPT_LOSS_OUTPUT, OPT_PRECISION
};

typedef struct opts {
    const char *net, *data, *val, *out, *weights, *resume, *log, *schedule;
    tl_kind loss;
    const char *label_input, *loss_output;
    double val_split;
    int64_t batch, epochs, steps, warmup, ckpt_every;
    int drop_last, shuffle, prefetch, no_state, normalize, allow_unused;
    float mean, std;
    mge_optim_kind kind;
    int kind_given;
    double lr, momentum, dampening, beta1, beta2, eps, wd, clip;
    int nesterov;
    /* which optimizer options were given (an option that does not apply is a usage error) */
    int g_lr, g_momentum, g_dampening, g_nesterov, g_betas, g_eps, g_wd;
    int g_batch, g_schedule, g_warmup, g_clip;
    uint64_t seed;
    int seed_given;
    double bucket_mb, comm_timeout;
    int check_sync, sync_bn;
    int precision;           /* MGE_PRECISION_*, or -1: the model's own */
    cli_common co;
} opts;

/* the job this process is a rank of (one process: comm NULL) */
static train_dist dist;

/* ---------------------------------------------------------------- numeric options
 * Every number is checked before any work: finite and in the range the
 * training step can use. Learning rates travel to the update nodes as f32,
 * and the step count as f32 too (exact up to 2^24). */

#define F32_MAX 3.4028234663852886e38
#define MAX_STEPS ((int64_t)1 << 24)

typedef struct range {
    double lo, hi;
    int lo_open, hi_open;
    const char *why;   /* appended to the message, or "" */
} range;

static const range R_LR = {0, F32_MAX, 0, 0, " (learning rates are stored as f32)"};
static const range R_UNIT = {0, 1, 0, 0, ""};
static const range R_BETA = {0, 1, 0, 1, ""};
static const range R_NONNEG = {0, F32_MAX, 0, 0, " (a finite f32 >= 0)"};
static const range R_POS = {0, F32_MAX, 1, 0, " (a finite f32 > 0)"};

static int in_range(double v, const range *r)
{
    if (!isfinite(v) || (r->lo_open ? v <= r->lo : v < r->lo) || (r->hi_open ? v >= r->hi : v > r->hi))
        return 0;
    /* a positive value that f32 rounds to 0 would silently be 0 */
    return !(v != 0 && (float)v == 0);
}

static const char *range_str(const range *r, char *b, size_t n)
{
    snprintf(b, n, "%c%g, %g%c%s", r->lo_open ? '(' : '[', r->lo, r->hi, r->hi_open ? ')' : ']', r->why);
    return b;
}

/* The number s of option flag, in r; anything else is a usage error naming
 * the flag and its value (whole, for a pair: shown). */
static double num_arg(const char *flag, const char *shown, const char *s, const range *r)
{
    char *end, b[96];
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || isnan(v) || isspace((unsigned char)*s))
        cli_usage("%s %s: not a number", flag, shown);
    if ((v != 0 && (float)v == 0) || (errno == ERANGE && fabs(v) < 1))
        cli_usage("%s %s: too small: as f32 it would be 0", flag, shown);
    if (errno == ERANGE || !in_range(v, r))
        cli_usage("%s %s: out of range: expected %s in %s", flag, shown, shown == s ? "a number" : "numbers",
                  range_str(r, b, sizeof b));
    return v;
}

static double num_opt(const char *flag, const char *s, const range *r)
{
    return num_arg(flag, s, s, r);
}

/* A whole number of option flag in [lo, hi]. */
static int64_t int_opt(const char *flag, const char *s, int64_t lo, int64_t hi)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || isspace((unsigned char)*s))
        cli_usage("%s %s: not a whole number", flag, s);
    if (errno == ERANGE || v < lo || v > hi)
        cli_usage("%s %s: out of range: expected a whole number in [%lld, %lld]", flag, s, (long long)lo,
                  (long long)hi);
    return (int64_t)v;
}

/* "A,B" for --betas and --normalize. */
static void num_pair(const char *flag, const char *s, const range *ra, const range *rb, double *a, double *b)
{
    const char *comma = strchr(s, ',');
    char first[64];
    size_t n = comma ? (size_t)(comma - s) : 0;
    if (!comma || n == 0 || n >= sizeof first)
        cli_usage("%s %s: expected two numbers separated by a comma", flag, s);
    memcpy(first, s, n);
    first[n] = 0;
    *a = num_arg(flag, s, first, ra);
    *b = num_arg(flag, s, comma + 1, rb);
}

static void parse_args(int argc, char **argv, opts *o)
{
    static const struct option longs[] = {
        CLI_LONG_COMMON,
        {"output", 1, 0, 'o'},
        {"data", 1, 0, OPT_DATA},
        {"val", 1, 0, OPT_VAL},
        {"val-split", 1, 0, OPT_VAL_SPLIT},
        {"batch", 1, 0, OPT_BATCH},
        {"drop-last", 0, 0, OPT_DROP_LAST},
        {"no-shuffle", 0, 0, OPT_NO_SHUFFLE},
        {"normalize", 1, 0, OPT_NORMALIZE},
        {"no-prefetch", 0, 0, OPT_NO_PREFETCH},
        {"epochs", 1, 0, OPT_EPOCHS},
        {"steps", 1, 0, OPT_STEPS},
        {"optimizer", 1, 0, OPT_OPTIMIZER},
        {"lr", 1, 0, OPT_LR},
        {"momentum", 1, 0, OPT_MOMENTUM},
        {"dampening", 1, 0, OPT_DAMPENING},
        {"nesterov", 0, 0, OPT_NESTEROV},
        {"betas", 1, 0, OPT_BETAS},
        {"eps", 1, 0, OPT_EPS},
        {"weight-decay", 1, 0, OPT_WD},
        {"schedule", 1, 0, OPT_SCHEDULE},
        {"warmup", 1, 0, OPT_WARMUP},
        {"clip-norm", 1, 0, OPT_CLIP},
        {"seed", 1, 0, OPT_SEED},
        {"weights", 1, 0, OPT_WEIGHTS},
        {"allow-unused", 0, 0, OPT_ALLOW_UNUSED},
        {"resume", 1, 0, OPT_RESUME},
        {"checkpoint-every", 1, 0, OPT_CKPT},
        {"no-state", 0, 0, OPT_NO_STATE},
        {"log", 1, 0, OPT_LOG},
        {"bucket-mb", 1, 0, OPT_BUCKET_MB},
        {"comm-timeout", 1, 0, OPT_COMM_TIMEOUT},
        {"check-sync", 0, 0, OPT_CHECK_SYNC},
        {"sync-bn", 0, 0, OPT_SYNC_BN},
        {"loss", 1, 0, OPT_LOSS},
        {"precision", 1, 0, OPT_PRECISION},
        {"label-input", 1, 0, OPT_LABEL_INPUT},
        {"loss-output", 1, 0, OPT_LOSS_OUTPUT},
        {0, 0, 0, 0},
    };
    memset(o, 0, sizeof *o);
    o->batch = 64;
    o->shuffle = 1;
    o->prefetch = 1;
    o->kind = MGE_OPTIM_SGD;
    o->schedule = "constant";
    o->bucket_mb = 25;
    o->comm_timeout = 300;
    o->precision = -1;
    double m, s;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":o:fqvh", longs, NULL)) != -1) {
        switch (c) {
        case 'o': o->out = optarg; break;
        case OPT_DATA: o->data = optarg; break;
        case OPT_VAL: o->val = optarg; break;
        case OPT_VAL_SPLIT: {
            static const range frac = {0, 1, 1, 1, " (a fraction)"};
            o->val_split = num_opt("--val-split", optarg, &frac);
            break;
        }
        case OPT_BATCH:
            o->batch = int_opt("--batch", optarg, 1, MAX_STEPS);
            o->g_batch = 1;
            break;
        case OPT_DROP_LAST: o->drop_last = 1; break;
        case OPT_NO_SHUFFLE: o->shuffle = 0; break;
        case OPT_NORMALIZE: {
            static const range mean = {-F32_MAX, F32_MAX, 0, 0, " (a finite f32)"};
            num_pair("--normalize", optarg, &mean, &R_POS, &m, &s);
            o->normalize = 1;
            o->mean = (float)m;
            o->std = (float)s;
            break;
        }
        case OPT_NO_PREFETCH: o->prefetch = 0; break;
        case OPT_EPOCHS: o->epochs = int_opt("--epochs", optarg, 1, MAX_STEPS); break;
        case OPT_STEPS: o->steps = int_opt("--steps", optarg, 1, MAX_STEPS); break;
        case OPT_OPTIMIZER:
            if (strcmp(optarg, "sgd") == 0)
                o->kind = MGE_OPTIM_SGD;
            else if (strcmp(optarg, "adam") == 0)
                o->kind = MGE_OPTIM_ADAM;
            else if (strcmp(optarg, "adamw") == 0)
                o->kind = MGE_OPTIM_ADAMW;
            else
                cli_usage("--optimizer %s: expected sgd, adam or adamw", optarg);
            o->kind_given = 1;
            break;
        case OPT_LR:
            o->lr = num_opt("--lr", optarg, &R_LR);
            o->g_lr = 1;
            break;
        case OPT_MOMENTUM:
            o->momentum = num_opt("--momentum", optarg, &R_UNIT);
            o->g_momentum = 1;
            break;
        case OPT_DAMPENING:
            o->dampening = num_opt("--dampening", optarg, &R_UNIT);
            o->g_dampening = 1;
            break;
        case OPT_NESTEROV: o->nesterov = o->g_nesterov = 1; break;
        case OPT_BETAS:
            num_pair("--betas", optarg, &R_BETA, &R_BETA, &o->beta1, &o->beta2);
            o->g_betas = 1;
            break;
        case OPT_EPS:
            o->eps = num_opt("--eps", optarg, &R_NONNEG);
            o->g_eps = 1;
            break;
        case OPT_WD:
            o->wd = num_opt("--weight-decay", optarg, &R_NONNEG);
            o->g_wd = 1;
            break;
        case OPT_SCHEDULE:
            o->schedule = optarg;
            o->g_schedule = 1;
            break;
        case OPT_WARMUP:
            o->warmup = int_opt("--warmup", optarg, 0, MAX_STEPS);
            o->g_warmup = 1;
            break;
        case OPT_CLIP:
            o->clip = num_opt("--clip-norm", optarg, &R_POS);
            o->g_clip = 1;
            break;
        case OPT_SEED:
            o->seed = cli_u64("--seed", optarg);
            o->seed_given = 1;
            break;
        case OPT_WEIGHTS: o->weights = optarg; break;
        case OPT_ALLOW_UNUSED: o->allow_unused = 1; break;
        case OPT_RESUME: o->resume = optarg; break;
        case OPT_CKPT: o->ckpt_every = int_opt("--checkpoint-every", optarg, 1, MAX_STEPS); break;
        case OPT_NO_STATE: o->no_state = 1; break;
        case OPT_BUCKET_MB: {
            static const range mb = {0, 2048, 1, 0, " (MiB)"};
            o->bucket_mb = num_opt("--bucket-mb", optarg, &mb);
            break;
        }
        case OPT_COMM_TIMEOUT: {
            static const range sec = {0, 1e6, 1, 0, " (seconds)"};
            o->comm_timeout = num_opt("--comm-timeout", optarg, &sec);
            break;
        }
        case OPT_CHECK_SYNC: o->check_sync = 1; break;
        case OPT_SYNC_BN: o->sync_bn = 1; break;
        case OPT_PRECISION:
            if (strcmp(optarg, "f32") == 0)
                o->precision = MGE_PRECISION_F32;
            else if (strcmp(optarg, "bf16") == 0)
                o->precision = MGE_PRECISION_BF16;
            else
                cli_usage("--precision %s: expected f32 or bf16", optarg);
            break;
        case OPT_LOSS:
            if (strcmp(optarg, "cross_entropy") == 0)
                o->loss = TL_CROSS_ENTROPY;
            else if (strcmp(optarg, "mse") == 0)
                o->loss = TL_MSE;
            else
                cli_usage("--loss %s: expected cross_entropy or mse", optarg);
            break;
        case OPT_LABEL_INPUT:
            if (!*optarg)
                cli_usage("--label-input: expected a name");
            o->label_input = optarg;
            break;
        case OPT_LOSS_OUTPUT: o->loss_output = optarg; break;
        case OPT_LOG: {
            size_t n = strlen(optarg);
            if (!(n >= 4 && strcmp(optarg + n - 4, ".csv") == 0) && !(n >= 6 && strcmp(optarg + n - 6, ".jsonl") == 0) &&
                !(n >= 5 && strcmp(optarg + n - 5, ".json") == 0))
                cli_usage("--log %s: expected a file name ending in .jsonl or .csv", optarg);
            o->log = optarg;
            break;
        }
        default:
            if (!cli_common_opt(c, optarg, &o->co, help))
                cli_usage("unhandled option");
        }
    }
    cli_check_device(o->co.device);
    if (optind >= argc)
        cli_usage("no model given (NET: a text model, .mge or .onnx)");
    if (argc - optind > 1)
        cli_usage("too many arguments (one model)");
    o->net = argv[optind];
    if (!o->data)
        cli_usage("no training data: give --data");
    if (!o->out)
        cli_usage("no output: give -o OUT.mge");
    if (o->epochs && o->steps)
        cli_usage("--epochs and --steps cannot be combined");
    if (o->val && o->val_split > 0)
        cli_usage("--val and --val-split cannot be combined");
    if ((o->label_input || o->loss_output) && !o->loss)
        cli_usage("%s only applies to --loss", o->label_input ? "--label-input" : "--loss-output");
    if (o->allow_unused && !o->weights)
        cli_usage("--allow-unused only applies to --weights");
    if (o->weights && o->resume)
        cli_usage("--weights and --resume cannot be combined (a checkpoint holds its weights)");
    if (o->ckpt_every && strcmp(o->out, "-") == 0)
        cli_usage("--checkpoint-every needs -o FILE, not stdout");
    if (o->no_state && o->ckpt_every)
        cli_usage("--no-state and --checkpoint-every cannot be combined (checkpoints need the state)");
    const char *kn = o->kind == MGE_OPTIM_SGD ? "sgd" : o->kind == MGE_OPTIM_ADAM ? "adam" : "adamw";
    if (o->kind != MGE_OPTIM_SGD) {
        if (o->g_momentum)
            cli_usage("--momentum does not apply to --optimizer %s (sgd only)", kn);
        if (o->g_dampening)
            cli_usage("--dampening does not apply to --optimizer %s (sgd only)", kn);
        if (o->g_nesterov)
            cli_usage("--nesterov does not apply to --optimizer %s (sgd only)", kn);
    } else {
        if (o->g_betas)
            cli_usage("--betas does not apply to --optimizer sgd (adam and adamw only)");
        if (o->g_eps)
            cli_usage("--eps does not apply to --optimizer sgd (adam and adamw only)");
        if (o->nesterov && !(o->momentum > 0 && o->dampening == 0))
            cli_usage("--nesterov needs --momentum > 0 and no dampening");
    }
    if (!o->epochs && !o->steps)
        o->epochs = 1;
}

/* ---------------------------------------------------------------- resume */

static const char *meta_or(const mge_graph *g, const char *k, const char *def)
{
    const char *v = mge_graph_get_meta(g, k);
    return v ? v : def;
}

/* A checkpoint fits NET when it has the same params and state (names,
 * dtypes, shapes) and the same nodes (names and ops). */
static int check_arch(const mge_graph *net, const mge_graph *ck, const char *where)
{
    char a[96], b[96];
    for (int v = 0; v < net->nvalues; v++) {
        const mge_value *nv = &net->values[v];
        if (nv->kind != MGE_VAL_PARAM && nv->kind != MGE_VAL_STATE && nv->kind != MGE_VAL_INPUT)
            continue;
        int k = mge_graph_find(ck, nv->name);
        if (k < 0) {
            cli_error(where, "another architecture: it has no '%s' (%s in the model)", nv->name,
                      mge_shape_str(nv->dtype, nv->ndim, nv->dims, a, sizeof a));
            return -1;
        }
        const mge_value *cv = &ck->values[k];
        int same = cv->kind == nv->kind && cv->dtype == nv->dtype && cv->ndim == nv->ndim;
        for (int d = 0; same && d < nv->ndim; d++)
            same = cv->dims[d] == nv->dims[d];
        if (!same) {
            cli_error(where, "another architecture: '%s' is %s there, %s in the model", nv->name,
                      mge_shape_str(cv->dtype, cv->ndim, cv->dims, b, sizeof b),
                      mge_shape_str(nv->dtype, nv->ndim, nv->dims, a, sizeof a));
            return -1;
        }
    }
    for (int v = 0; v < ck->nvalues; v++) {
        const mge_value *cv = &ck->values[v];
        if ((cv->kind == MGE_VAL_PARAM || cv->kind == MGE_VAL_STATE) && !mge_value_is_opt_state(cv) &&
            mge_graph_find(net, cv->name) < 0) {
            cli_error(where, "another architecture: it has '%s', which the model lacks", cv->name);
            return -1;
        }
    }
    if (ck->nnodes != net->nnodes) {
        cli_error(where, "another architecture: %d nodes, the model has %d", ck->nnodes, net->nnodes);
        return -1;
    }
    for (int i = 0; i < net->nnodes; i++)
        if (net->nodes[i].op != ck->nodes[i].op || strcmp(net->nodes[i].name, ck->nodes[i].name) != 0) {
            cli_error(where, "another architecture: node %d is '%s' (%s), the model has '%s' (%s)", i,
                      ck->nodes[i].name, mge_op_info(ck->nodes[i].op)->name, net->nodes[i].name,
                      mge_op_info(net->nodes[i].op)->name);
            return -1;
        }
    if (!mge_graph_get_meta(ck, "train.step")) {
        cli_error(where, "not a training checkpoint (no training state: written with --no-state, or not by mge-train)");
        return -1;
    }
    return 0;
}

/* Values a checkpoint supplied (those given as options passed num_opt):
 * a damaged or hand-edited one must not reach the optimizer. */
static int check_ck_values(const opts *o, const char *where)
{
    const struct { const char *key; double v; const range *r; int use; } hp[] = {
        {"train.lr", o->lr, &R_LR, o->g_lr},
        {"train.momentum", o->momentum, &R_UNIT, o->kind == MGE_OPTIM_SGD && o->g_momentum},
        {"train.dampening", o->dampening, &R_UNIT, o->kind == MGE_OPTIM_SGD && o->g_dampening},
        {"train.beta1", o->beta1, &R_BETA, o->kind != MGE_OPTIM_SGD && o->g_betas},
        {"train.beta2", o->beta2, &R_BETA, o->kind != MGE_OPTIM_SGD && o->g_betas},
        {"train.eps", o->eps, &R_NONNEG, o->kind != MGE_OPTIM_SGD && o->g_eps},
        {"train.weight_decay", o->wd, &R_NONNEG, o->g_wd},
        {"train.clip_norm", o->clip, &R_NONNEG, o->g_clip},   /* 0: no clipping */
    };
    char b[96];
    for (size_t i = 0; i < sizeof hp / sizeof hp[0]; i++)
        if (hp[i].use && !in_range(hp[i].v, hp[i].r)) {
            cli_error(where, "the checkpoint's %s = %g is out of range: expected a number in %s", hp[i].key, hp[i].v,
                      range_str(hp[i].r, b, sizeof b));
            return -1;
        }
    return 0;
}

/* ---------------------------------------------------------------- data */

static int load_data(const char *spec, const mge_graph *g, const opts *o, mge_dataset *ds)
{
    mge_error err;
    mge_error_clear(&err);
    if (cli_stdin_ready(spec, "data", "give --data FILE or redirect stdin"))
        return -1;
    if (mge_dataset_load(spec, ds, &err)) {
        cli_mge_error(cli_name(spec), &err);
        return -1;
    }
    mge_data_opts dopts = {.normalize = o->normalize, .mean = o->mean, .std = o->std};
    if (mge_dataset_bind(ds, g, g->ninputs, g->inputs, &dopts, &err)) {
        cli_mge_error(cli_name(spec), &err);
        return -1;
    }
    return 0;
}

/* Labels must be class indices below the logits' width, or the loss's
 * ignore_index (only the cross_entropy's label input is checked: other
 * integer inputs, embedding indices, have their own bounds). */
static int check_labels(const mge_dataset *ds, const mge_trainer *t, const mge_graph *g, const char *where)
{
    int64_t classes = mge_trainer_classes(t);
    if (classes <= 0)
        return 0;
    int label = -1;
    int64_t ignore = -100;
    for (int i = 0; i < g->nnodes; i++)
        if (g->nodes[i].op == MGE_OP_CROSS_ENTROPY && g->nodes[i].out[0] == g->loss && g->nodes[i].nin > 1) {
            label = g->nodes[i].in[1];
            ignore = mge_node_int(&g->nodes[i], MGE_KEY_ignore_index, -100);
        }
    /* the arrays are the inputs in order (and a lengths array after them) */
    for (int i = 0; i < ds->n - ds->lengths && i < mge_trainer_ninputs(t); i++) {
        const mge_value *v = &g->values[mge_trainer_input(t, i)];
        if ((v->dtype != MGE_I32 && v->dtype != MGE_I64) || (label >= 0 && mge_trainer_input(t, i) != label))
            continue;
        int64_t lo, hi;
        if (mge_dataset_label_range(ds, i, &lo, &hi) != MGE_OK)
            continue;
        if ((lo < 0 && lo != ignore) || (hi >= classes && hi != ignore)) {
            cli_error(where, "labels for '%s' range over [%lld, %lld]: the model has %lld classes (0..%lld)",
                      v->name, (long long)lo, (long long)hi, (long long)classes, (long long)(classes - 1));
            return -1;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- saving */

static int save(const opts *o, const mge_optim_opts *oc, const mge_trainer *t, const mge_graph *model, int64_t step,
                int64_t epoch_done, int with_state)
{
    if (dist.rank != 0)
        return 0;   /* rank 0 writes for the job */
    mge_error err;
    mge_error_clear(&err);
    mge_graph *out = NULL;
    if (mge_trainer_export(t, model, with_state, &out, &err)) {
        if (err.code == MGE_ERR_NONFINITE)
            cli_error(cli_name(o->out), "%s at step %lld; not written", err.msg, (long long)step);
        else
            cli_mge_error(cli_name(o->out), &err);
        return -1;
    }
    char b[64];
    const char *kn = o->kind == MGE_OPTIM_SGD ? "sgd" : o->kind == MGE_OPTIM_ADAM ? "adam" : "adamw";
    int bad = 0;
    if (!with_state)
        goto write; /* a model, not a checkpoint: no training state at all */
    /* everything --resume needs to continue the same run */
    const struct { const char *k; double v; } hp[] = {
        {"train.lr", oc->lr}, {"train.momentum", oc->momentum}, {"train.dampening", oc->dampening},
        {"train.nesterov", oc->nesterov}, {"train.beta1", oc->beta1}, {"train.beta2", oc->beta2},
        {"train.eps", oc->eps}, {"train.weight_decay", oc->weight_decay}, {"train.clip_norm", oc->clip_norm},
        {"train.warmup", (double)o->warmup},
    };
    for (size_t i = 0; i < sizeof hp / sizeof hp[0]; i++) {
        snprintf(b, sizeof b, "%.17g", hp[i].v);
        bad |= mge_graph_set_meta(out, hp[i].k, b, &err) != MGE_OK;
    }
    bad |= mge_graph_set_meta(out, "train.schedule", o->schedule, &err) != MGE_OK;
    snprintf(b, sizeof b, "%lld", (long long)step);
    bad |= mge_graph_set_meta(out, "train.step", b, &err) != MGE_OK;
    snprintf(b, sizeof b, "%lld", (long long)epoch_done);
    bad |= mge_graph_set_meta(out, "train.epochs_done", b, &err) != MGE_OK;
    snprintf(b, sizeof b, "%llu", (unsigned long long)o->seed);
    bad |= mge_graph_set_meta(out, "train.seed", b, &err) != MGE_OK;
    bad |= mge_graph_set_meta(out, "train.optimizer", kn, &err) != MGE_OK;
    snprintf(b, sizeof b, "%lld", (long long)o->batch);
    bad |= mge_graph_set_meta(out, "train.batch", b, &err) != MGE_OK;
    snprintf(b, sizeof b, "%d", dist.comm ? dist.size : 1);
    bad |= mge_graph_set_meta(out, "train.ranks", b, &err) != MGE_OK;
    if (bad) {
        cli_mge_error(cli_name(o->out), &err);
        mge_graph_free(out);
        return -1;
    }
write:;
    mge_write_opts wo = {.no_state = !with_state};
    mge_buf buf = {0};
    int rc = 0;
    if (mge_file_write(out, &wo, &buf, &err)) {
        cli_mge_error(cli_name(o->out), &err);
        rc = -1;
    } else {
        rc = cli_write_buf(strcmp(o->out, "-") == 0 ? NULL : o->out, &buf, 1, o->co.force);
    }
    mge_buf_free(&buf);
    mge_graph_free(out);
    return rc;
}

/* ---------------------------------------------------------------- validation */

/* Loss and accuracy over val into es. A non-finite loss stays in es as it
 * is (has_val says there was a validation), so the summary and the log
 * show it. */
static int validate(mge_trainer *t, const mge_dataset *val, const opts *o, tr_epoch *es)
{
    mge_error err;
    mge_error_clear(&err);
    mge_loader *l = NULL;
    es->val_loss = NAN;
    es->val_acc = -1;
    if (mge_loader_create(val, o->batch, 0, 0, 0, 0, &l, &err) || mge_loader_start(l, 0, 0, &err)) {
        cli_mge_error("validation", &err);
        mge_loader_free(l);
        return -1;
    }
    double lsum = 0;
    int64_t n = 0, correct = 0, have_acc = 1;
    for (;;) {
        const mge_tensor *const *batch;
        mge_status s = mge_loader_next(l, &batch, &err);
        if (s == MGE_ERR_EOF)
            break;
        mge_train_result r;
        if (s || mge_trainer_eval(t, batch, &r, &err)) {
            cli_mge_error("validation", &err);
            mge_loader_free(l);
            return -1;
        }
        lsum += r.loss * (double)r.count;
        n += r.count;
        if (r.correct < 0)
            have_acc = 0;
        else
            correct += r.correct;
    }
    mge_loader_free(l);
    if (n > 0) {
        es->has_val = 1;
        es->val_loss = lsum / (double)n;
        if (isnan(es->val_loss))
            es->val_loss = NAN;   /* one spelling in every log: a kernel's NaN may carry a sign */
        es->val_acc = have_acc ? (double)correct / (double)n : -1;
    }
    /* the data is finite (checked at load): the model overflows on it.
     * Said once; the summaries and the log show every epoch's value. */
    static int warned;
    if (es->has_val && !isfinite(es->val_loss) && !warned++)
        cli_warn(cli_name(o->val ? o->val : o->data), "the validation loss is %s after epoch %lld: the model's "
                 "outputs over the validation data are not finite", isnan(es->val_loss) ? "NaN" : "infinite",
                 (long long)es->epoch);
    return 0;
}

/* A NaN or inf in the (bound, in-memory) data would make every loss over
 * it non-finite: an error before training, naming the array and sample. */
static int check_data_finite(const mge_dataset *ds, const char *what, const char *where)
{
    for (int a = 0; a < ds->n; a++) {
        const mge_tensor *x = &ds->t[a];
        if (!mge_dtype_is_float(x->dtype) || !x->data)
            continue;
        int64_t n = mge_tensor_numel(x), per = x->dims[0] > 0 ? n / x->dims[0] : 1, bad = -1;
        double v = 0;
        if (x->dtype == MGE_F32) {
            const float *f = x->data;
            for (int64_t i = 0; i < n && bad < 0; i++)
                if (!isfinite(f[i]))
                    bad = i, v = f[i];
        } else {
            for (int64_t i = 0; i < n && bad < 0; i++)
                if (!isfinite(v = cli_tensor_value(x, i)))
                    bad = i;
        }
        if (bad >= 0) {
            cli_error(where, "the %s data holds %s in '%s' (sample %lld): the loss over it would not be finite; "
                      "fix or drop that sample", what, isnan(v) ? "NaN" : v > 0 ? "inf" : "-inf",
                      ds->names && ds->names[a] ? ds->names[a] : "?", (long long)(bad / (per ? per : 1)));
            return -1;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- stopping */

/* What OUT holds when the run stops at a failure: the checkpoint this run
 * wrote last, or nothing new. */
static void kept(const opts *o, int64_t start_step, int64_t last_ckpt, char *b, size_t n)
{
    if (o->ckpt_every && last_ckpt > start_step)
        snprintf(b, n, "%s holds the last checkpoint (step %lld)", o->out, (long long)last_ckpt);
    else
        snprintf(b, n, "nothing written");
}

static void log_failed(const opts *o, tr_report *rep, int64_t step, int64_t start_step, int64_t last_ckpt)
{
    char b[1200];
    kept(o, start_step, last_ckpt, b, sizeof b);
    tr_report_clear(rep);
    cli_error(o->log, "writing the log failed: %s; stopping after step %lld: %s", strerror(rep->err), (long long)step,
              b);
    rep->err_said = 1;
}

/* One step on this rank's share of the global batch; under MPI the loss
 * and accuracy come back summed over the ranks (the global batch's). */
static mge_status train_step(mge_trainer *t, const mge_loader *l, const mge_tensor *const *batch, double lr,
                             int64_t step, mge_train_result *r, mge_error *err)
{
    /* under MPI the loader gathered only this rank's rows of the batch */
    dist.whole = dist.comm ? mge_loader_batch_rows(l) : 0;
    const mge_tensor *const *mine;
    int64_t rows;
    double share;
    mge_status s = train_dist_shard(&dist, batch, mge_trainer_ninputs(t), &mine, &rows, &share, err);
    if (s)
        return s;
    mge_trainer_set_share(t, share);
    if ((s = mge_trainer_step(t, mine, lr, step, r, err)) || !dist.comm)
        return s;
    /* per-rank batchnorm statistics: rank 0's on every rank, as PyTorch's DDP keeps them */
    if (!dist.sync_bn && (s = mge_trainer_bcast_stats(t, 0, err)))
        return s;
    double v[4] = {r->loss * (double)r->count, r->correct < 0 ? 0 : (double)r->correct, (double)r->count,
                   r->correct < 0};
    if ((s = dist.comm->allreduce_f64(dist.comm, v, 4, err)))
        return s;
    r->count = (int64_t)v[2];
    r->loss = v[2] > 0 ? v[0] / v[2] : r->loss;
    r->correct = v[3] > 0 ? -1 : (int64_t)v[1];
    return MGE_OK;
}

/* Steps from+1 .. to again, on the batches they had: the guard went back to
 * its snapshot after step from, and the steps are deterministic. */
static mge_status replay(mge_trainer *t, mge_loader *loader, const mge_sched *sched, int64_t bpe, int64_t from,
                         int64_t to, mge_error *err)
{
    int64_t epoch = from / bpe;
    mge_status s = mge_loader_start(loader, epoch, from % bpe, err);
    for (int64_t st = from + 1; !s && st <= to;) {
        const mge_tensor *const *batch;
        mge_train_result r;
        if ((s = mge_loader_next(loader, &batch, err)) == MGE_ERR_EOF)
            s = mge_loader_start(loader, ++epoch, 0, err);
        else if (!s && !(s = train_step(t, loader, batch, mge_sched_lr(sched, st), st, &r, err)))
            st++;
    }
    return s;
}

/* A step came back non-finite and the guard undid it: step - 1 is the last
 * good one. OUT gets it when this run got past its start and OUT is a file
 * (the steps since the guard's snapshot run again to get there). */
static void diverged(const opts *o, const mge_optim_opts *oc, mge_trainer *t, const mge_graph *model, tr_report *rep,
                     mge_loader *loader, const mge_sched *sched, const mge_error *e, int64_t step, int64_t start_step,
                     int64_t last_ckpt, int64_t bpe)
{
    const char *where = cli_name(o->net), *hint = " (try a lower --lr, or --clip-norm)";
    int64_t good = step - 1, held = mge_trainer_good_step(t);
    char b[1200];
    mge_error re;
    mge_error_clear(&re);
    if (good > start_step && strcmp(o->out, "-") != 0 && held >= start_step && !tr_report_flush(rep)) {
        if (held < good && replay(t, loader, sched, bpe, held, good, &re)) {
            kept(o, start_step, last_ckpt, b, sizeof b);
            cli_error(where, "%s; going back to step %lld failed (%s); %s", e->msg, (long long)good, re.msg, b);
            return;
        }
        if (save(o, oc, t, model, good, good / bpe, !o->no_state) == 0) {
            cli_error(where, "%s; the output, %s, holds the weights of step %lld%s", e->msg, o->out, (long long)good,
                      hint);
            return;
        }
    }
    kept(o, start_step, last_ckpt, b, sizeof b);
    cli_error(where, "%s; %s%s", e->msg, b, hint);
}

/* ---------------------------------------------------------------- distributed */

/* The ranks agree on the model, its initial params, the data and every
 * option that changes the run, before rank 0's params and state go to
 * all (the same seed gives the same init: a difference is a mistake). */
static int start_ranks_agree(const opts *o, const mge_graph *net, mge_trainer *t, const mge_dataset *train)
{
    enum { K = 32 };
    const char *names[K];
    char vals[K][96];
    const char *vp[K];
    uint64_t h[K];
    int k = 0;
    mge_error err;
    mge_error_clear(&err);
#define ITEM(nm, ...) do { names[k] = nm; snprintf(vals[k], sizeof vals[k], __VA_ARGS__); vp[k] = vals[k]; \
        h[k] = train_hash_bytes(0xcbf29ce484222325ull, vals[k], strlen(vals[k])); k++; } while (0)
    /* numbers: the hash of their bits, shown short */
#define ITEMD(nm, v) do { double v_ = (v); ITEM(nm, "%g", v_); \
        h[k - 1] = train_hash_bytes(0xcbf29ce484222325ull, &v_, sizeof v_); } while (0)
    ITEM("--batch", "%lld", (long long)o->batch);
    ITEM("--epochs/--steps", "%lld/%lld", (long long)o->epochs, (long long)o->steps);
    ITEM("--optimizer", "%s", o->kind == MGE_OPTIM_SGD ? "sgd" : o->kind == MGE_OPTIM_ADAM ? "adam" : "adamw");
    ITEMD("--lr", o->lr);
    ITEMD("--momentum", o->momentum);
    ITEMD("--dampening", o->dampening);
    ITEM("--nesterov", "%s", o->nesterov ? "given" : "not given");
    ITEMD("--betas (beta1)", o->beta1);
    ITEMD("--betas (beta2)", o->beta2);
    ITEMD("--eps", o->eps);
    ITEMD("--weight-decay", o->wd);
    ITEM("--schedule", "%s", o->schedule);
    ITEM("--warmup", "%lld", (long long)o->warmup);
    ITEMD("--clip-norm", o->clip);
    ITEM("--seed", "%llu", (unsigned long long)o->seed);
    ITEM("--drop-last", "%s", o->drop_last ? "given" : "not given");
    ITEM("--no-shuffle", "%s", o->shuffle ? "not given" : "given");
    ITEM("--normalize", "%s%.9g,%.9g", o->normalize ? "" : "not given: ", o->mean, o->std);
    ITEMD("--val-split", o->val_split);
    ITEM("--checkpoint-every", "%lld", (long long)o->ckpt_every);
    ITEMD("--bucket-mb", o->bucket_mb);
    ITEM("--sync-bn", "%s", o->sync_bn ? "given" : "not given");
    ITEM("--precision", "%s", o->precision < 0 ? "not given" : o->precision ? "bf16" : "f32");
    ITEM("--check-sync", "%s", o->check_sync ? "given" : "not given");
#undef ITEM
#undef ITEMD
    names[k] = "the model";
    vp[k] = NULL;
    h[k++] = train_hash_graph(net);
    names[k] = "the initial parameters (--weights, --resume or the model's own)";
    vp[k] = NULL;
    if (mge_trainer_hash(t, &h[k++], &err)) {
        cli_mge_error(NULL, &err);
        return -1;
    }
    names[k] = "the training data (--data)";
    vp[k] = NULL;
    h[k++] = train_hash_dataset(train);
    if (train_dist_agree(&dist, k, names, vp, h)) {
        dist.all_failed = 1;
        return -1;
    }
    if (mge_trainer_bcast(t, 0, &err)) {
        cli_mge_error(NULL, &err);
        return -1;
    }
    return 0;
}

/* -v: the gradient buckets' communication, and how much of it the step waited for. */
static void comm_summary(const mge_trainer *t)
{
    mge_comm_stats st;
    if (!mge_trainer_comm_stats(t, &st) || st.steps <= 0)
        return;
    double c = 0, w = 0;
    int64_t bytes = 0;
    for (int i = 0; i < st.nbuckets; i++) {
        c += st.comm_s[i];
        w += st.wait_s[i];
        bytes += st.bytes[i];
        cli_note(NULL, "bucket %d: %d gradient%s, %lld bytes, %.3f ms per step in flight, %.3f ms waited", i,
                 st.members[i], st.members[i] == 1 ? "" : "s", (long long)st.bytes[i], 1e3 * st.comm_s[i] / (double)st.steps,
                 1e3 * st.wait_s[i] / (double)st.steps);
    }
    cli_note(NULL, "allreduce: %d bucket%s, %lld bytes per step; %.3f ms per step in flight, %.3f ms not overlapped "
             "(%.0f%% hidden by the backward pass)", st.nbuckets, st.nbuckets == 1 ? "" : "s", (long long)bytes,
             1e3 * c / (double)st.steps, 1e3 * w / (double)st.steps, c > 0 ? 100.0 * (1 - w / c) : 0.0);
}

/* ---------------------------------------------------------------- main */

int main(int argc, char **argv)
{
    cli_init("mge-train", argv);
    opts o;
    parse_args(argc, argv, &o);
    if (train_mpi_open(&argc, &argv, o.comm_timeout, &dist.comm))
        return 1;
    if (dist.comm) {
        static char prog[48];
        dist.rank = dist.comm->rank;
        dist.size = dist.comm->size;
        dist.check_sync = o.check_sync;
        dist.sync_bn = o.sync_bn;
        /* one write per line: the launcher interleaves the ranks' stderr */
        setvbuf(stderr, NULL, _IOLBF, 1 << 12);
        if (dist.rank > 0) {
            /* rank 0 speaks for the job; the others only say what failed there */
            snprintf(prog, sizeof prog, "mge-train: rank %d", dist.rank);
            cli_prog = prog;
            cli_verbose = -1;
        }
    } else {
        dist.size = 1;
    }
    mge_error err;
    mge_error_clear(&err);
    int rc = 1;
    mge_graph *net = NULL, *ck = NULL;
    if (dist.comm && strcmp(o.data, "-") == 0) {
        cli_error(NULL, "--data -: under an MPI launcher stdin reaches rank 0 only; give a file");
        train_mpi_close(dist.comm, 1);
        return 1;
    }
    mge_dataset train = {0}, val = {0};
    mge_trainer *t = NULL;
    mge_loader *loader = NULL;
    tr_report rep;
    memset(&rep, 0, sizeof rep);
    const char *where = cli_name(o.net);

    if (cli_model_load(o.net, &net))
        return 1;
    if (o.loss && train_loss_attach(net, o.loss, o.loss_output, o.label_input ? o.label_input : "label", where))
        goto done;
    if (net->loss < 0) {
        cli_error(where, "the model has no loss to minimize (add a `minimize LOSS` line, or give --loss "
                  "cross_entropy|mse)");
        goto done;
    }
    if (o.precision >= 0) {
        /* mixed precision as PyTorch's CPU autocast: the layers' products
         * (forward and backward) in bf16, master weights and optimizer state f32 */
        int nset = 0;
        if (mge_precision_set(net, o.precision, 0, NULL, &nset, NULL, 0, &err)) {
            cli_mge_error(where, &err);
            goto done;
        }
        if (o.precision == MGE_PRECISION_BF16 && !nset)
            cli_warn(where, "--precision bf16: no layer it applies to (dense conv2d, linear, matmul, attention)");
        if (o.precision == MGE_PRECISION_BF16 && !dist.rank && !mge_cpu_bf16_kernels(NULL, NULL))
            cli_warn(where, "--precision bf16: this CPU has neither AMX-BF16 nor AVX512-BF16; the layers compute in f32");
        cli_bf16_note(where, net);
    }
    int64_t start_step = 0;
    const mge_graph *model = net;
    if (o.resume) {
        if (cli_model_load(o.resume, &ck))
            goto done;
        if (check_arch(net, ck, cli_name(o.resume)))
            goto done;
        start_step = strtoll(meta_or(ck, "train.step", "0"), NULL, 10);
        long ck_ranks = strtol(meta_or(ck, "train.ranks", "1"), NULL, 10);
        if (ck_ranks != dist.size) {
            /* its steps were global batches of ck_ranks * batch samples: another
             * number of ranks would continue from another place in the data */
            cli_error(cli_name(o.resume), "the checkpoint was written by %ld rank%s, this run has %d: resume it "
                      "with %s", ck_ranks, ck_ranks == 1 ? "" : "s", dist.size,
                      ck_ranks == 1 ? "one process (no mpirun)" : "the same mpirun -np");
            goto done;
        }
        if (start_step < 0 || start_step > MAX_STEPS) {
            cli_error(cli_name(o.resume), "the checkpoint's train.step = %lld: expected a whole number in [0, %lld]",
                      (long long)start_step, (long long)MAX_STEPS);
            goto done;
        }
        uint64_t ck_seed = strtoull(meta_or(ck, "train.seed", "0"), NULL, 10);
        if (o.seed_given && o.seed != ck_seed)
            cli_warn(cli_name(o.resume), "--seed %llu differs from the checkpoint's %llu: the data order changes",
                     (unsigned long long)o.seed, (unsigned long long)ck_seed);
        if (!o.seed_given)
            o.seed = ck_seed;
        const char *kn = meta_or(ck, "train.optimizer", "");
        const char *want = o.kind == MGE_OPTIM_SGD ? "sgd" : o.kind == MGE_OPTIM_ADAM ? "adam" : "adamw";
        if (*kn && strcmp(kn, want) != 0) {
            if (o.kind_given) {
                cli_error(cli_name(o.resume), "the checkpoint was trained with --optimizer %s, not %s", kn, want);
                goto done;
            }
            o.kind = strcmp(kn, "adam") == 0 ? MGE_OPTIM_ADAM : strcmp(kn, "adamw") == 0 ? MGE_OPTIM_ADAMW
                                                                                          : MGE_OPTIM_SGD;
        }
        /* options not given continue the checkpoint's run */
        const char *v;
#define FROM_CK(flag, key, dst) if (!(flag) && (v = mge_graph_get_meta(ck, key))) { dst = strtod(v, NULL); flag = 1; }
        FROM_CK(o.g_lr, "train.lr", o.lr)
        if (o.kind == MGE_OPTIM_SGD) {
            FROM_CK(o.g_momentum, "train.momentum", o.momentum)
            FROM_CK(o.g_dampening, "train.dampening", o.dampening)
            double nest = 0;
            int gn = o.g_nesterov;
            FROM_CK(gn, "train.nesterov", nest)
            if (!o.g_nesterov)
                o.nesterov = nest != 0;
        } else {
            int gb1 = o.g_betas, gb2 = o.g_betas;
            FROM_CK(gb1, "train.beta1", o.beta1)
            FROM_CK(gb2, "train.beta2", o.beta2)
            o.g_betas = gb1 && gb2;
            FROM_CK(o.g_eps, "train.eps", o.eps)
        }
        FROM_CK(o.g_wd, "train.weight_decay", o.wd)
        FROM_CK(o.g_clip, "train.clip_norm", o.clip)
        double dv = 0;
        int gtmp = o.g_warmup;
        FROM_CK(gtmp, "train.warmup", dv)
        if (!o.g_warmup) {
            if (!(dv >= 0 && dv <= (double)MAX_STEPS && dv == floor(dv))) {
                cli_error(cli_name(o.resume), "the checkpoint's train.warmup = %g: expected a whole number in [0, %lld]",
                          dv, (long long)MAX_STEPS);
                goto done;
            }
            o.warmup = (int64_t)dv;
        }
        gtmp = o.g_batch;
        dv = 1;
        FROM_CK(gtmp, "train.batch", dv)
        if (!o.g_batch && gtmp) {
            if (!(dv >= 1 && dv <= (double)MAX_STEPS && dv == floor(dv))) {
                cli_error(cli_name(o.resume), "the checkpoint's train.batch = %g: expected a whole number in [1, %lld]",
                          dv, (long long)MAX_STEPS);
                goto done;
            }
            o.batch = (int64_t)dv;
        }
#undef FROM_CK
        if (check_ck_values(&o, cli_name(o.resume)))
            goto done;
        if (!o.g_schedule && (v = mge_graph_get_meta(ck, "train.schedule")))
            o.schedule = v;
        model = ck;
    } else if (o.weights && cli_weights_bind(net, o.weights, 1, o.allow_unused) < 0) {
        goto done;
    }
    if (mge_graph_init_params((mge_graph *)model, o.seed, &err)) {
        cli_mge_error(where, &err);
        goto done;
    }

    /* data */
    if (load_data(o.data, model, &o, &train) || check_data_finite(&train, "training", cli_name(o.data)))
        goto done;
    if (o.val) {
        if (load_data(o.val, model, &o, &val) || check_data_finite(&val, "validation", cli_name(o.val)))
            goto done;
    } else if (o.val_split > 0) {
        if (mge_dataset_split(&train, o.val_split, o.seed, &val, &err)) {
            cli_mge_error(cli_name(o.data), &err);
            goto done;
        }
    }
    if (train.count <= 0) {
        cli_error(cli_name(o.data), "empty dataset: no training samples");
        goto done;
    }

    /* the trainer */
    mge_train_opts to;
    memset(&to, 0, sizeof to);
    mge_optim_defaults(o.kind, &to.optim);
    if (o.g_lr)
        to.optim.lr = o.lr;
    if (o.g_momentum)
        to.optim.momentum = o.momentum;
    if (o.g_dampening)
        to.optim.dampening = o.dampening;
    to.optim.nesterov = o.nesterov;
    if (o.g_betas) {
        to.optim.beta1 = o.beta1;
        to.optim.beta2 = o.beta2;
    }
    if (o.g_eps)
        to.optim.eps = o.eps;
    if (o.g_wd)
        to.optim.weight_decay = o.wd;
    to.optim.clip_norm = o.clip;
    to.threads = cli_threads(&o.co);
    if (dist.comm && !o.co.threads) {
        /* the ranks on this machine share its CPUs */
        const char *ls = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
        if (!ls)
            ls = getenv("MPI_LOCALNRANKS");
        long local = ls ? strtol(ls, NULL, 10) : 1;
        if (local > 1)
            to.threads = to.threads / (int)local > 1 ? to.threads / (int)local : 1;
    }
    to.device = o.co.device;
    to.seed = o.seed;
    to.guard = 1;
    to.comm = dist.comm;
    to.bucket_mb = o.bucket_mb;
    to.sync_bn = o.sync_bn;
    if (o.sync_bn) {
        int nbn = 0;
        for (int i = 0; i < model->nnodes; i++)
            nbn += model->nodes[i].op == MGE_OP_BATCHNORM;
        if (!nbn)
            cli_warn(where, "--sync-bn: the model has no batchnorm; there are no statistics to synchronize");
        else if (!dist.comm)
            cli_warn(where, "--sync-bn: one process: the statistics are over the whole batch anyway");
    }
    if (mge_trainer_create(model, &to, &t, &err)) {
        cli_mge_error(err.code == MGE_ERR_NONFINITE && o.resume ? cli_name(o.resume)
                      : err.code == MGE_ERR_NONFINITE && o.weights ? cli_name(o.weights) : where, &err);
        goto done;
    }
    if (check_labels(&train, t, model, cli_name(o.data)) || (val.count > 0 && check_labels(&val, t, model, cli_name(o.val ? o.val : o.data))))
        goto done;
    if (dist.comm && start_ranks_agree(&o, net, t, &train))
        goto done;
    /* every rank walks the same global batches (one shuffle) and trains on its share */
    int64_t gbatch = o.batch * dist.size;
    int drop_last = o.drop_last;
    if (dist.comm) {
        if (train.count < dist.size) {
            cli_error(cli_name(o.data), "%lld samples for %d ranks: every rank needs at least one",
                      (long long)train.count, dist.size);
            goto done;
        }
        int64_t tail = train.count % gbatch;
        if (!drop_last && tail > 0 && tail < dist.size) {
            cli_warn(cli_name(o.data), "the last %lld sample%s of each epoch make%s less than one per rank: dropped",
                     (long long)tail, tail == 1 ? "" : "s", tail == 1 ? "s" : "");
            drop_last = 1;
        }
    }
    /* each rank gathers (and, from an uncompressed NPY file, reads) only its rows */
    if (mge_loader_create(&train, gbatch, o.shuffle, drop_last, o.seed, o.prefetch, &loader, &err) ||
        (dist.comm && mge_loader_set_part(loader, dist.rank, dist.size, &err))) {
        cli_mge_error(cli_name(o.data), &err);
        goto done;
    }
    int64_t bpe = mge_loader_batches(loader);
    if (bpe <= 0) {
        cli_error(cli_name(o.data), "%lld samples make no batch of %lld with --drop-last", (long long)train.count,
                  (long long)o.batch);
        goto done;
    }
    int64_t total = o.steps ? o.steps : o.epochs * bpe;
    if (total > MAX_STEPS)
        cli_usage("--epochs %lld: %lld epochs of %lld batches are %lld steps, more than %lld (steps travel as f32)",
                  (long long)o.epochs, (long long)o.epochs, (long long)bpe, (long long)total, (long long)MAX_STEPS);
    int64_t epochs = (total + bpe - 1) / bpe;
    if (start_step >= total) {
        cli_error(cli_name(o.resume), "the checkpoint is at step %lld: nothing left of %lld steps",
                  (long long)start_step, (long long)total);
        goto done;
    }
    mge_sched sched;
    if (mge_sched_parse(o.schedule, to.optim.lr, o.warmup, total, &sched, &err)) {
        cli_usage("--schedule: %s", err.msg);
    }
    {
        /* the largest rate of the run: step schedules rise with GAMMA > 1,
         * cosine ones towards MIN_LR; warm-up only scales down */
        double peak = to.optim.lr;
        if (sched.kind == MGE_SCHED_STEP && sched.gamma > 1)
            peak = sched.base_lr * pow(sched.gamma, (double)((total - 1) / sched.step_size));
        else if (sched.kind == MGE_SCHED_COSINE && sched.min_lr > peak)
            peak = sched.min_lr;
        char b[96];
        if (!in_range(peak, &R_LR))
            cli_usage("--schedule %s: the learning rate would reach %g, out of range: expected %s", o.schedule, peak,
                      range_str(&R_LR, b, sizeof b));
    }
    int tty = isatty(2);
    if (tr_report_open(&rep, dist.rank == 0 ? o.log : NULL, o.resume != NULL, tty && cli_verbose >= 0,
                       (tty && cli_verbose >= 0) || cli_verbose > 0))
        goto done;
    if (cli_verbose > 0) {
        mge_plan_stats st;
        if (mge_trainer_stats(t, MGE_BATCH(o.batch), &st, &err) == MGE_OK)
            cli_note(where, "training step at batch %lld: arena %zu bytes, lower bound %zu (%.2fx), no reuse %zu",
                     (long long)o.batch, st.arena_bytes, st.lower_bound,
                     st.lower_bound ? (double)st.arena_bytes / (double)st.lower_bound : 1.0, st.no_reuse_bytes);
        cli_note(cli_name(o.data), "%lld samples, %lld batches of %lld per epoch, %lld steps", (long long)train.count,
                 (long long)bpe, (long long)gbatch, (long long)total);
        if (dist.comm)
            cli_note(NULL, "%d ranks (%s), %lld samples per rank and step", dist.size, train_mpi_name(),
                     (long long)o.batch);
    }

    /* the loop */
    int64_t step = start_step, epoch = start_step / bpe;
    if (mge_loader_start(loader, epoch, start_step % bpe, &err)) {
        cli_mge_error(cli_name(o.data), &err);
        goto done;
    }
    double t0 = mge_now(), te = t0, lsum = 0;
    int64_t seen = 0, nsum = 0, csum = 0, acc_ok = 1, last_ckpt = start_step;
    while (step < total) {
        const mge_tensor *const *batch;
        mge_status s = mge_loader_next(loader, &batch, &err);
        if (s == MGE_ERR_EOF) {
            /* end of an epoch */
            epoch++;
            tr_epoch es = {.epoch = epoch, .epochs = epochs, .step = step, .train_loss = nsum ? lsum / (double)nsum : NAN,
                           .train_acc = acc_ok && nsum ? (double)csum / (double)nsum : -1, .val_loss = NAN,
                           .val_acc = -1, .seconds = mge_now() - te};
            if (val.count > 0 && validate(t, &val, &o, &es))
                goto done;
            if (tr_report_epoch(&rep, &es)) {
                log_failed(&o, &rep, step, start_step, last_ckpt);
                goto done;
            }
            lsum = 0;
            nsum = csum = 0;
            acc_ok = 1;
            te = mge_now();
            if (mge_loader_start(loader, epoch, 0, &err)) {
                cli_mge_error(cli_name(o.data), &err);
                goto done;
            }
            continue;
        }
        if (s) {
            cli_mge_error(cli_name(o.data), &err);
            goto done;
        }
        step++;
        double lr = mge_sched_lr(&sched, step);
        mge_train_result r;
        if ((s = train_step(t, loader, batch, lr, step, &r, &err))) {
            tr_report_clear(&rep);
            if (s == MGE_ERR_NONFINITE)
                diverged(&o, &to.optim, t, model, &rep, loader, &sched, &err, step, start_step, last_ckpt, bpe);
            else
                cli_mge_error(where, &err);
            goto done;
        }
        lsum += r.loss * (double)r.count;
        nsum += r.count;
        seen += r.count;
        if (r.correct < 0)
            acc_ok = 0;
        else
            csum += r.correct;
        double now = mge_now(), el = now - t0;
        tr_step ts = {.step = step, .total_steps = total, .epoch = epoch + 1, .epochs = epochs,
                      .batch = (step - 1) % bpe + 1, .batches = bpe, .loss = r.loss,
                      .acc = r.correct >= 0 && r.count ? (double)r.correct / (double)r.count : -1, .lr = lr,
                      .samples_per_s = el > 0 ? (double)seen / el : 0, .elapsed = el,
                      .eta = step > start_step ? el / (double)(step - start_step) * (double)(total - step) : -1};
        if (tr_report_step(&rep, &ts)) {
            log_failed(&o, &rep, step, start_step, last_ckpt);
            goto done;
        }
        if (train_dist_check_sync(&dist, t, step))
            goto done;
        if (o.ckpt_every && step % o.ckpt_every == 0 && step < total) {
            /* the log on disk reaches the checkpoint a resumed run appends to */
            if (tr_report_flush(&rep)) {
                log_failed(&o, &rep, step, start_step, last_ckpt);
                goto done;
            }
            if (save(&o, &to.optim, t, model, step, step / bpe, 1))
                goto done;
            last_ckpt = step;
        }
    }
    /* a last partial epoch (--steps) or the final full one */
    if (nsum > 0) {
        int64_t done_epochs = (step + bpe - 1) / bpe;
        tr_epoch es = {.epoch = done_epochs, .epochs = epochs, .step = step, .train_loss = lsum / (double)nsum,
                       .train_acc = acc_ok ? (double)csum / (double)nsum : -1, .val_loss = NAN, .val_acc = -1,
                       .seconds = mge_now() - te};
        if (val.count > 0 && validate(t, &val, &o, &es))
            goto done;
        if (tr_report_epoch(&rep, &es)) {
            log_failed(&o, &rep, step, start_step, last_ckpt);
            goto done;
        }
    }
    /* the log is complete before the model is written: a run whose log
     * failed writes nothing */
    if (tr_report_close(&rep)) {
        log_failed(&o, &rep, step, start_step, last_ckpt);
        goto done;
    }
    if (save(&o, &to.optim, t, model, step, step / bpe, !o.no_state))
        goto done;
    if (dist.comm && cli_verbose > 0)
        comm_summary(t);
    rc = 0;
done:
    /* after another failure the log is kept as far as it got */
    if (tr_report_close(&rep) && !rep.err_said)
        cli_error(o.log, "writing the log failed: %s", strerror(rep.err));
    mge_loader_free(loader);
    mge_trainer_free(t);
    mge_dataset_free(&train);
    mge_dataset_free(&val);
    mge_graph_free(ck);
    mge_graph_free(net);
    /* messages and the progress bar are output too: a failed write to
     * stderr fails the run, silently since nothing can be said */
    if (fflush(stderr) != 0 || ferror(stderr))
        rc = 1;
    train_dist_free(&dist);
    train_mpi_close(dist.comm, rc != 0 && !dist.all_failed);
    return rc;
}
