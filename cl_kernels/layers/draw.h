// The random numbers of layers that draw them, as host/layers/layer_type.h draws them (mix32,
// draw_uniform): the same integer hash, so every variant draws the same numbers.
inline uint mix32(uint h) {
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    h *= 0x846ca68bu;
    return h ^ (h >> 16);
}

// Uniform in [0, 1) with 24 bits, for unit `unit` of sample `sample` at training step `step`.
inline float draw_uniform(uint seed, uint step, uint sample, uint unit) {
    const uint h = mix32(mix32(mix32(seed ^ step) ^ sample) ^ unit);
    return (float)(h >> 8) * (1.0f / 16777216.0f);
}
