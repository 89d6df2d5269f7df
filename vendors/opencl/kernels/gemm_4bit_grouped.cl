// gemm_4bit_grouped.cl — kbit_gemm_4bit_grouped on the call's queue, with no host round trip; compiled
// after gemm_4bit.cl (its dot_runs and group_sum give each output gemm_4bit's bytes). Three kernels:
//   grouped_plan    one work-group: checks the ids and groups the pairs by expert;
//   grouped_gemm    one group of DOT_GROUP items per (touched expert slot, output feature);
//   grouped_combine one item per (token, output feature), when there are combine weights.
// The plan buffer, ints: [0] the first bad pair (INT_MAX: none), [1] its id, [2] touched experts,
// [3] unused, then slot_expert[slots], slot_begin[slots + 1], order[pairs], cursor[experts]. A set
// record makes every later kernel return without writing, so a bad call writes nothing.

#define PLAN_GROUP 256
#define PLAN_HEAD 4

kernel void grouped_plan(ARRAY(int, ids), ARRAY(int, plan), long pairs, long experts, long slots) {
    local int bad;
    local int part[2 * PLAN_GROUP];  // per item: rows, then touched experts, of its chunk of experts
    local int tile[PLAN_GROUP];
    const int lid = get_local_id(0), G = get_local_size(0);
    const global int* id = AT(int, ids);
    global int* head = AT(int, plan);
    global int* slot_expert = head + PLAN_HEAD;
    global int* slot_begin = slot_expert + slots;
    global int* order = slot_begin + slots + 1;
    global int* cursor = order + pairs;

    if (lid == 0) bad = INT_MAX;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (long p = lid; p < pairs; p += G)
        if (id[p] < 0 || id[p] >= experts) atomic_min(&bad, (int)p);
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0) {
        head[0] = bad;
        head[1] = bad == INT_MAX ? 0 : id[bad];
        head[2] = 0;
    }
    if (bad != INT_MAX) return;  // the same for every item

    // Rows per expert.
    for (long e = lid; e < experts; e += G) cursor[e] = 0;
    barrier(CLK_GLOBAL_MEM_FENCE);
    for (long p = lid; p < pairs; p += G) atomic_inc(&cursor[id[p]]);
    barrier(CLK_GLOBAL_MEM_FENCE);

    // Exclusive scans of the rows and of the touched experts over contiguous chunks of experts.
    const long chunk = (experts + G - 1) / G, e0 = min(experts, lid * chunk), e1 = min(experts, e0 + chunk);
    int rows = 0, touched = 0;
    for (long e = e0; e < e1; ++e) {
        rows += cursor[e];
        touched += cursor[e] > 0;
    }
    part[lid] = rows;
    part[PLAN_GROUP + lid] = touched;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0) {
        int r = 0, t = 0;
        for (int i = 0; i < G; ++i) {
            const int ri = part[i], ti = part[PLAN_GROUP + i];
            part[i] = r;
            part[PLAN_GROUP + i] = t;
            r += ri;
            t += ti;
        }
        head[2] = t;
        slot_begin[t] = (int)pairs;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    int at = part[lid], slot = part[PLAN_GROUP + lid];
    for (long e = e0; e < e1; ++e) {
        const int count = cursor[e];
        if (count > 0) {
            slot_expert[slot] = (int)e;
            slot_begin[slot] = at;
            ++slot;
        }
        cursor[e] = at;
        at += count;
    }
    barrier(CLK_GLOBAL_MEM_FENCE);

    // The pairs in ascending order, each appended to its expert's rows by the one item that owns the
    // expert (e % G): stable without atomics.
    for (long start = 0; start < pairs; start += G) {
        barrier(CLK_LOCAL_MEM_FENCE);
        if (start + lid < pairs) tile[lid] = id[start + lid];
        barrier(CLK_LOCAL_MEM_FENCE);
        const int n = (int)min((long)G, pairs - start);
        for (int i = 0; i < n; ++i) {
            const int e = tile[i];
            if (e % G == lid) order[cursor[e]++] = (int)(start + i);
        }
    }
}

// y[p][n] = x_p . W_e[n] for the rows p of the expert in slot s: dot_runs over the whole tensor's nibbles
// and scales, which for an expert with a slice are exactly gemm_4bit's runs on that slice. y is `out`
// without combine weights, else scratch for grouped_combine.
kernel void grouped_gemm(ARRAY(uchar, A), ARRAY(uchar, B), ARRAY(float, absmax), ARRAY(uchar, absmax_8bit),
                         ARRAY(float, absmax_code), ARRAY(float, absmax_offset), ARRAY(int, plan), ARRAY(uchar, y),
                         int dt, long N, long K, int blocksize, int qt, int a_rows_per_token, int top_k, long pairs,
                         long slots) {
    local float scratch[DOT_GROUP];
    const global int* head = AT(int, plan);
    const long cell = get_group_id(0);
    const long s = cell / N, n = cell % N;
    if (head[0] != INT_MAX || s >= head[2]) return;  // the same for every item of the group
    const global int* slot_begin = head + PLAN_HEAD + slots;
    const global int* order = slot_begin + slots + 1;
    const long e = head[PLAN_HEAD + s];
    float lut[16];
    for (int j = 0; j < 16; ++j) lut[j] = value_4bit(qt, j);
    const bool nested = absmax_8bit_buf != 0;
    const long row_bytes = K * (dt == KBIT_DTYPE_FP32 ? 4 : 2);
    for (int r = slot_begin[s]; r < slot_begin[s + 1]; ++r) {
        const long p = order[r];
        const long row = a_rows_per_token == 1 ? p / top_k : p;
        const float sum = group_sum(dot_runs(AT(uchar, A) + row * row_bytes, dt, AT(uchar, B), (e * N + n) * K, K,
                                             blocksize, lut, AT(float, absmax), nested ? AT(uchar, absmax_8bit) : 0,
                                             nested ? AT(float, absmax_code) : 0,
                                             nested ? AT(float, absmax_offset) : 0),
                                    scratch);
        if (get_local_id(0) == 0) store_elem(AT(uchar, y), p * N + n, dt, sum);
        barrier(CLK_LOCAL_MEM_FENCE);  // scratch[0] is read by every item before the next row writes it
    }
}

// out[t][n] = RN(sum_j combine[t][j] * y[t][j][n]) in fp32, j in order, each product and sum rounded on
// its own (FP_CONTRACT OFF; x86's NaN results, as the host's loop gives).
kernel void grouped_combine(ARRAY(uchar, y), ARRAY(float, combine), ARRAY(int, plan), ARRAY(uchar, out), int dt,
                            long N, int top_k, long cells) {
    const long c = get_global_id(0);
    if (c >= cells || AT(int, plan)[0] != INT_MAX) return;
    const long t = c / N, n = c % N;
    const global float* w = AT(float, combine) + t * top_k;
    float s = 0.0f;
    for (int j = 0; j < top_k; ++j) s = add_rn(s, mul_rn(w[j], load_elem(AT(uchar, y), (t * top_k + j) * N + n, dt)));
    store_elem(AT(uchar, out), c, dt, s);
}
