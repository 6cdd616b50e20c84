/* Minimal Cortex-M startup for the lmu-edge test images (semihosting through newlib's librdimon). */
#include <stdint.h>

extern int main(int argc, char **argv);
extern void initialise_monitor_handles(void);
extern void exit(int status);
extern uint32_t __bss_start__, __bss_end__, __stack_top;

void Reset_Handler(void);
void Default_Handler(void);

void Default_Handler(void) {
    for (;;) {
    }
}

typedef void (*lmu_handler_t)(void);

/* initial stack pointer, then the exception handlers (reset, NMI, hard fault, ...) */
struct lmu_vector_table {
    uint32_t *stack_top;
    lmu_handler_t handlers[15];
};

__attribute__((section(".isr_vector"), used)) const struct lmu_vector_table lmu_vectors = {
    &__stack_top, {Reset_Handler, Default_Handler, Default_Handler}};

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
