/* mge-opt — read a model (text or .mge), bind weights, run graph passes,
 * write .mge (or the text form with -S). With no passes it is the assembler. */
#include "cli.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static void help(void)
{
    printf("Usage: %s [options] [FILE|-]\n"
           "Read a model (text form or .mge), optionally bind weights and run graph\n"
           "passes, and write it as .mge (or as text with -S).\n"
           "\n"
           "  -o FILE             write to FILE (default: stdout)\n"
           "  -S, --text          write the text form instead of .mge\n"
           "      --weights W.npz bind parameter values by name (all must match)\n"
           "      --seed S        seed for parameters without values (default 0)\n"
           "  -O0 -O1 -O2 -O3     pass presets (-O0: none)\n"
           "      --passes=A,B    run these passes, in order\n"
           "      --list-passes   list the passes and presets, then exit\n"
           "  -f, --force         write binary output to a terminal\n"
           "  -q, --quiet         only errors\n"
           "  -v, --verbose       more detail on stderr\n"
           "      --threads N     worker threads (1..256)\n"
           "      --device DEV    cpu (cuda[:N] needs a CUDA build)\n"
           "  -h, --help          show this help and exit\n"
           "      --version       show the version and exit\n"
           "\n"
           "Exit status: 0 success, 1 failure, 2 usage error.\n", cli_prog);
}

static void list_passes(void)
{
    for (int i = 0; i < mge_pass_count(); i++) {
        const mge_pass *p = mge_pass_get(i);
        printf("%-16s %s\n", p->name, p->summary);
    }
    for (int l = 0; l <= 3; l++) {
        const char *pre = mge_pass_preset(l);
        printf("-O%d%*s %s\n", l, 13, "", pre && *pre ? pre : "(no passes)");
    }
}

enum { OPT_WEIGHTS = CLI_OPT_FIRST_TOOL, OPT_SEED, OPT_PASSES, OPT_LIST };

int main(int argc, char **argv)
{
    cli_init("mge-opt", argv);
    static const struct option longs[] = {
        CLI_LONG_COMMON,
        {"output", 1, 0, 'o'},
        {"text", 0, 0, 'S'},
        {"weights", 1, 0, OPT_WEIGHTS},
        {"seed", 1, 0, OPT_SEED},
        {"passes", 1, 0, OPT_PASSES},
        {"list-passes", 0, 0, OPT_LIST},
        {0, 0, 0, 0},
    };
    cli_common co = {0};
    const char *out = NULL, *weights = NULL, *passes = NULL;
    int text = 0, level = -1, list = 0;
    uint64_t seed = 0;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":o:SO:fqvh", longs, NULL)) != -1) {
        switch (c) {
        case 'o': out = optarg; break;
        case 'S': text = 1; break;
        case 'O':
            if (strlen(optarg) != 1 || optarg[0] < '0' || optarg[0] > '3')
                cli_usage("-O%s: expected -O0, -O1, -O2 or -O3", optarg);
            level = optarg[0] - '0';
            break;
        case OPT_WEIGHTS: weights = optarg; break;
        case OPT_SEED: seed = cli_u64("--seed", optarg); break;
        case OPT_PASSES: passes = optarg; break;
        case OPT_LIST: list = 1; break;
        default:
            if (!cli_common_opt(c, optarg, &co, help))
                cli_usage("unhandled option");
        }
    }
    if (level >= 0 && passes)
        cli_usage("-O%d and --passes cannot be combined", level);
    if (argc - optind > 1)
        cli_usage("too many arguments (one model at most)");
    cli_check_device(co.device);
    if (list) {
        list_passes();
        return fflush(stdout) ? 1 : 0;
    }
    if (passes && (!*passes || passes[0] == ',' || passes[strlen(passes) - 1] == ',' || strstr(passes, ",,")))
        cli_usage("--passes: empty pass name in '%s'", passes);
    if (passes) {
        /* Check the names now so a typo is a usage error before any work. */
        char *copy = strdup(passes);
        for (char *tok = copy, *save = NULL; copy; tok = NULL) {
            char *name = strtok_r(tok, ",", &save);
            if (!name)
                break;
            if (!mge_pass_find(name)) {
                char known[512] = "";
                size_t k = 0;
                for (int i = 0; i < mge_pass_count() && k < sizeof known; i++)
                    k += (size_t)snprintf(known + k, sizeof known - k, "%s%s", i ? ", " : "",
                                          mge_pass_get(i)->name);
                cli_usage("--passes: unknown pass '%s' (known passes: %s)", name, known);
            }
        }
        free(copy);
    }
    const char *in = optind < argc ? argv[optind] : "-";
    const char *where = cli_name(in);

    mge_error err;
    mge_error_clear(&err);
    mge_graph *g = NULL;
    if (cli_model_load(in, &g)) {
        return 1;
    }
    int rc = 1;
    if (weights) {
        mge_tlist l = {0};
        mge_status s = mge_npz_read_path(weights, &l, &err);
        if (s) {
            cli_mge_error(cli_name(weights), &err);
            goto done;
        }
        s = mge_params_bind(g, &l, 0, &err);
        int nbound = l.n;
        mge_tlist_free(&l);
        if (s) {
            cli_mge_error(cli_name(weights), &err);
            goto done;
        }
        cli_note(cli_name(weights), "bound %d parameter tensors", nbound);
    }
    int uninit = 0, valued = 0;
    for (int v = 0; v < g->nvalues; v++) {
        int p = g->values[v].kind == MGE_VAL_PARAM || g->values[v].kind == MGE_VAL_STATE;
        uninit += p && !g->values[v].data;
        valued += p && g->values[v].data;
    }
    if (uninit) {
        if (mge_graph_init_params(g, seed, &err)) {
            cli_mge_error(where, &err);
            goto done;
        }
        cli_note(where, "%d parameters without values initialized (seed %llu)", uninit, (unsigned long long)seed);
    }
    const char *list_str = passes ? passes : level >= 0 ? mge_pass_preset(level) : "";
    int changed = 0;
    if (mge_passes_run_list(&g, list_str, &changed, &err)) {
        cli_mge_error(where, &err);
        goto done;
    }
    if (*list_str)
        cli_note(where, "passes %s: %s", list_str, changed ? "graph changed" : "no change");

    mge_buf b = {0};
    mge_status s;
    if (text) {
        /* values that came from a file or --weights would be lost silently */
        if (valued)
            cli_warn(weights ? cli_name(weights) : where,
                     "the text form does not carry parameter values: %d tensors not written "
                     "(write .mge, or keep them with mge-dump --params W.npz and a weights \"W.npz\" line)",
                     valued);
        s = mge_text_print(g, &b, &err);
    } else {
        mge_write_opts wo = {0};
        s = mge_file_write(g, &wo, &b, &err);
    }
    if (s)
        cli_mge_error(where, &err);
    else
        rc = cli_write_buf(out, &b, !text, co.force) ? 1 : 0;
    mge_buf_free(&b);
done:
    mge_graph_free(g);
    return rc;
}
