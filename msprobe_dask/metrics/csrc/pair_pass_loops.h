/* The loops of pair_pass.c, included once per instruction set: every name goes through NAMED (the
   including file defines it to add a suffix) and PassFn, Result, the kinds and float_abs / double_abs
   come from there. */

static inline float NAMED(as_float)(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t NAMED(float_bits)(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline uint64_t NAMED(double_bits)(double f) {
    uint64_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float NAMED(f16_to_f32)(uint16_t h) {
    /* exact: the exponent rebiased, Inf/NaN moved to float32's top exponent, subnormals renormalised by
       a subtraction; selects rather than branches, so that the loops vectorise */
    const uint32_t top = 0x7c00u << 13;
    uint32_t o = ((uint32_t)(h & 0x7fffu) << 13) + ((127u - 15u) << 23);
    uint32_t exp = ((uint32_t)h << 13) & top;
    o += exp == top ? (128u - 16u) << 23 : 0;
    uint32_t sub = NAMED(float_bits)(NAMED(as_float)(o + (1u << 23)) - NAMED(as_float)(113u << 23));
    return NAMED(as_float)((exp == 0 ? sub : o) | (uint32_t)(h & 0x8000u) << 16);
}

static inline double NAMED(load)(const void *p, int kind, Py_ssize_t i) {
    switch (kind) {
    case F16: return (double)NAMED(f16_to_f32)(((const uint16_t *)p)[i]);
    case BF16: return (double)NAMED(as_float)((uint32_t)((const uint16_t *)p)[i] << 16);
    case F32: return (double)((const float *)p)[i];
    default: return ((const double *)p)[i];
    }
}

/* The loops vectorise:
   - no branches: where bench is not 0 a 0 is added in place of eps, which changes only a -0 in n into
     +0, and n - b is then -b either way;
   - the maxima of the absolute values are taken on their bits, which order non-negative floats as
     their values (and put a NaN above all: only NaN/Inf inputs make one, and Python then falls back). */
#undef PASS
#undef PASSES
#define PASS(NAME, NK, BK, REAL, UINT)                                                                  \
    static Result NAME(const void *n, const void *b, double *restrict n64,               \
                                     double *restrict b64, double *restrict diff64, Py_ssize_t size,    \
                                     double eps, double t1, double t5) {                                \
        const REAL e = (REAL)eps, l1 = (REAL)t1, l5 = (REAL)t5;                                          \
        uint64_t max_abs = 0;                                                                           \
        UINT max_rel = 0;                                                                               \
        int64_t under1 = 0, under5 = 0;                                                                 \
        for (Py_ssize_t i = 0; i < size; i++) {                                                         \
            double x = NAMED(load)(n, NK, i);                                                                  \
            double y = NAMED(load)(b, BK, i);                                                                  \
            double d = x - y;                                                                           \
            n64[i] = x;                                                                                 \
            b64[i] = y;                                                                                 \
            diff64[i] = d;                                                                              \
            uint64_t ad = NAMED(double_bits)(fabs(d));                                                         \
            max_abs = ad > max_abs ? ad : max_abs;                                                      \
            REAL xr = (REAL)x;                                                                          \
            REAL yr = (REAL)y;                                                                          \
            REAL z = yr == 0 ? e : 0;                                                                   \
            xr += z;                                                                                    \
            yr += z;                                                                                    \
            REAL r = REAL##_abs((xr - yr) / yr);                                                        \
            UINT rb = NAMED(REAL##_bits)(r);                                                                   \
            max_rel = rb > max_rel ? rb : max_rel;                                                      \
            under1 += r < l1;                                                                           \
            under5 += r < l5;                                                                           \
        }                                                                                               \
        Result res;                                                                                     \
        uint64_t abs_bits = max_abs;                                                                    \
        UINT rel_bits = max_rel;                                                                        \
        double abs_value;                                                                               \
        REAL rel_value;                                                                                 \
        memcpy(&abs_value, &abs_bits, sizeof abs_value);                                                \
        memcpy(&rel_value, &rel_bits, sizeof rel_value);                                                \
        res.max_abs = abs_value;                                                                        \
        res.max_rel = (double)rel_value;                                                                \
        res.under1 = (Py_ssize_t)under1;                                                                \
        res.under5 = (Py_ssize_t)under5;                                                                \
        return res;                                                                                     \
    }

typedef Result (*PassFn)(const void *, const void *, double *, double *, double *, Py_ssize_t, double,
                         double, double);

/* One loop per (n kind, b kind, relative error's dtype): the kinds are constants in each. */
#define PASSES(REAL, UINT, S)                                                                           \
    PASS(NAMED(p00##S), 0, 0, REAL, UINT) PASS(NAMED(p01##S), 0, 1, REAL, UINT) PASS(NAMED(p02##S), 0, 2, REAL, UINT)        \
    PASS(NAMED(p03##S), 0, 3, REAL, UINT) PASS(NAMED(p10##S), 1, 0, REAL, UINT) PASS(NAMED(p11##S), 1, 1, REAL, UINT)        \
    PASS(NAMED(p12##S), 1, 2, REAL, UINT) PASS(NAMED(p13##S), 1, 3, REAL, UINT) PASS(NAMED(p20##S), 2, 0, REAL, UINT)        \
    PASS(NAMED(p21##S), 2, 1, REAL, UINT) PASS(NAMED(p22##S), 2, 2, REAL, UINT) PASS(NAMED(p23##S), 2, 3, REAL, UINT)        \
    PASS(NAMED(p30##S), 3, 0, REAL, UINT) PASS(NAMED(p31##S), 3, 1, REAL, UINT) PASS(NAMED(p32##S), 3, 2, REAL, UINT)        \
    PASS(NAMED(p33##S), 3, 3, REAL, UINT)                                                                      \
    static const PassFn NAMED(passes##S)[4][4] = {{NAMED(p00##S), NAMED(p01##S), NAMED(p02##S), NAMED(p03##S)},                            \
                                           {NAMED(p10##S), NAMED(p11##S), NAMED(p12##S), NAMED(p13##S)},                            \
                                           {NAMED(p20##S), NAMED(p21##S), NAMED(p22##S), NAMED(p23##S)},                            \
                                           {NAMED(p30##S), NAMED(p31##S), NAMED(p32##S), NAMED(p33##S)}};

PASSES(float, uint32_t, _f)
PASSES(double, uint64_t, _d)

