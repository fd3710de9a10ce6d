/* mge_dataset.h — datasets and batch loading (part of the public API; included by mge.h). */
#ifndef MGE_DATASET_H
#define MGE_DATASET_H
#endif
