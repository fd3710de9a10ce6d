/* mge_optim.h — optimizers and learning-rate schedules (part of the public API; included by mge.h). */
#ifndef MGE_OPTIM_H
#define MGE_OPTIM_H
#endif
