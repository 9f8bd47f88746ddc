"""`compare peak`: the device's multiply-add throughput and memory bandwidth, measured and cached for
`compare run`'s utilisation."""
from __future__ import annotations

from nets.errors import UserError

from ..files import check_writable
from ..progress import Progress
from .common import unwritten


def cmd_peak(args) -> int:
    from backends.opencl.peak import measure_peak
    from backends.opencl.runtime import get_runtime

    from ..peak import cache_path, store
    if not 0 < args.cap_s < float("inf"):
        raise UserError(f"--cap-s must be a positive number of seconds, not {args.cap_s}")
    check_writable(cache_path(), "the peak cache")
    rt = get_runtime(args.device)
    progress = Progress()
    progress.until(progress.now() + args.cap_s)   # the time left: the cap's, at most
    try:
        peak = measure_peak(rt, progress.update, args.cap_s)
    finally:
        progress.done()
    kept = store(rt.info, peak)
    if args.json:
        from ..machine import emit
        emit("peak", {"device": rt.info, "peak": peak, "cached": None if kept.problem else str(cache_path())})
        unwritten([kept.problem])
        return 0
    d = peak["details"]
    print(f"{rt.info['name']} ({rt.info['platform']}, {rt.info['compute_units']} compute units)")
    print(f"  multiply-add: {peak['gflops']:.1f} GFLOP/s (float4 {d['float4_gflops']:.1f}, "
          f"float8 {d['float8_gflops']:.1f})")
    print(f"  bandwidth:    {peak['bandwidth_gbs']:.1f} GB/s (copy kernel {d['copy_kernel_gbs']:.1f}, "
          f"buffer copy {d['enqueue_copy_gbs']:.1f}; bytes read + written)")
    print(f"  timed by {d['timer']}, in {d['seconds']:.0f} s" + (f"; {d['capped']}" if d.get("capped") else ""))
    if kept.problem is None:
        print(f"cached in {cache_path()} for `compare run`")
    unwritten([kept.problem])
    return 0
