/* Versioned entry points: one function of the library per meaning of a
 * public name, bound by the linker to NAME@VERSION (an old binary's) or
 * NAME@@VERSION (the default, what new builds link against).  The map
 * file (src/libtcpx_p2p.map) names each version node.
 *
 * Written as the assembler's .symver directive rather than GCC's symver
 * attribute, which Clang before 16 ignores (with a warning), leaving the
 * public name out of the library altogether.  Use at file scope after the
 * function's definition:
 *
 *	TP_SYMVER(tp__config_init_v08, "tcpx_p2p_config_init@@TCPX_P2P_0.8");
 */
#ifndef TP_UTIL_SYMVER_H
#define TP_UTIL_SYMVER_H

#define TP_SYMVER(impl, name) __asm__(".symver " #impl ", " name)

#endif
