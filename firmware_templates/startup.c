/* Minimal Cortex-M startup for the lmu-edge test images (semihosting through newlib's librdimon). */
#include <stdint.h>

extern int main(int argc, char **argv);
extern void initialise_monitor_handles(void);
extern void exit(int status);
extern uint32_t __bss_start__, __bss_end__, __stack_top;

void Reset_Handler(void);
void Default_Handler(void);

/* A fault (stack overflow into the heap, an unaligned load on ARMv6-M, ...) ends the run with a failure
 * instead of hanging QEMU: semihosting SYS_EXIT (0x18) with ADP_Stopped_InternalError (0x20024), which
 * QEMU turns into exit status 1. */
void Default_Handler(void) {
    register uint32_t op __asm("r0") = 0x18u;
    register uint32_t reason __asm("r1") = 0x20024u;
    __asm volatile("bkpt 0xAB" : : "r"(op), "r"(reason) : "memory");
    for (;;) {
    }
}

typedef void (*lmu_handler_t)(void);

/* initial stack pointer, then the exception handlers (reset, NMI, hard fault, ...) */
struct lmu_vector_table {
    uint32_t *stack_top;
    lmu_handler_t handlers[15];
};

__attribute__((section(".isr_vector"), used))
const struct lmu_vector_table lmu_vectors = {&__stack_top, {Reset_Handler, Default_Handler, Default_Handler}};

void Reset_Handler(void) {
    uint32_t *p;
#if defined(__ARM_FP)
    *(volatile uint32_t *)0xE000ED88u |= (0xFu << 20); /* CPACR: enable the FPU (CP10, CP11) */
    __asm volatile("dsb\n isb");
#endif
    for (p = &__bss_start__; p < &__bss_end__; ++p) {
        *p = 0;
    }
    initialise_monitor_handles();
    exit(main(0, 0));
}

/* newlib's exit path references these; nothing to run */
void _init(void);
void _fini(void);
void _init(void) {}
void _fini(void) {}
