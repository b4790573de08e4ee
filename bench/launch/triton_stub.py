"""The Triton kernel of bench/launch/alternatives.py, in a module of its own:
@triton.jit reads the kernel's source and resolves `tl` among the module's
globals, so the kernel is defined at module level and this module is
imported only when Triton is there."""

import triton
import triton.language as tl


@triton.jit
def paged_decode_attn_fp8_stub(q, k_cache, v_cache, output, block_tables, seq_lens, max_blocks_per_seq,
                               num_q_heads, num_kv_heads, head_dim, block_size, inv_sqrt_d, k_scale, v_scale,
                               q_stride, cache_stride, sliding_window):
    # paged_decode_attn_fp8's parameters, a trivial body: never taken, as
    # sliding_window is 0. Unused parameters are still kernel arguments.
    if sliding_window == 12345:
        tl.store(output, tl.load(q))
