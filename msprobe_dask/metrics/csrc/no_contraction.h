/* IEEE arithmetic as written: no product and sum fused by the compiler (fp-contract off), so that the
   kernels' sums round where numpy's and OpenBLAS's do; an fma is one only where fmaf/fma/_mm*_fmadd_* says
   so. Included first by each metrics kernel. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#elif defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif
