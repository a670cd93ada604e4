/* optdefs.h — the defaults of the options that code below the option table needs as numbers: the simulated
 * device's transfer clock, which the sim backend, the prediction and the tier planner fall back on when a
 * caller leaves a rate or a cost at 0.  The option table (options.c) takes its default text from these same
 * macros (HOFF__DEF_TEXT), so each default is named once.  Plain numbers, no suffix: the text must parse.
 * Threading: constants only. */
#ifndef HOFF_OPTDEFS_H
#define HOFF_OPTDEFS_H

#define HOFF__DEF_SIM_H2D_GBPS 50         /* sim_h2d_gbps, GB/s */
#define HOFF__DEF_SIM_D2H_GBPS 50         /* sim_d2h_gbps, GB/s */
#define HOFF__DEF_SIM_LATENCY_NS 10000    /* sim_latency: 10us */
#define HOFF__DEF_SIM_FAULT_GBPS 8        /* sim_fault_gbps, GB/s */
#define HOFF__DEF_SIM_FAULT_NS 20000      /* sim_fault_ns: 20us */
#define HOFF__DEF_SIM_NVME_READ_GBPS 6.5  /* sim_nvme_read_gbps, GB/s */
#define HOFF__DEF_SIM_NVME_WRITE_GBPS 3.5 /* sim_nvme_write_gbps, GB/s */
#define HOFF__DEF_SIM_CALL_NS 5000        /* sim_call_ns: 5us */

/* A default above as the option table's text: HOFF__DEF_TEXT(HOFF__DEF_SIM_LATENCY_NS) is "10000". */
#define HOFF__DEF_TEXT_(x) #x
#define HOFF__DEF_TEXT(x) HOFF__DEF_TEXT_(x)

#endif
