"""Checks that look inside the tinygrad backend's child process, where
tinygrad runs (tests/test_tinygrad.py calls them there)."""
import numpy as np

from backends.options import RunOptions
from nets.weights import init_weights


def _recorded(calls: list[str], word: str, call):
    """`call`, each time it is called first noting `word` in `calls`."""
    def recorded(*args, **kwargs):
        calls.append(word)
        return call(*args, **kwargs)
    return recorded


def calls_during_run(target, store, net, batch: int) -> list[str]:
    """The OpenCL calls tinygrad makes in one run() of a prepared net: kernel enqueues and queue finishes,
    in order (through tinygrad's own binding, which its CL runtime looks up at each call)."""
    from tinygrad.runtime.autogen import opencl as cl

    from backends.peers.tinygrad_peer import TinygradInChild
    prepared = TinygradInChild(target, RunOptions(), store).prepare(net, init_weights(net, 0), batch)
    prepared.load_input(np.ones((batch,) + net.input_shape, np.float32))
    calls = []
    enqueue, finish = cl.clEnqueueNDRangeKernel, cl.clFinish
    cl.clEnqueueNDRangeKernel, cl.clFinish = _recorded(calls, "kernel", enqueue), _recorded(calls, "finish", finish)
    try:
        prepared.run()
    finally:
        cl.clEnqueueNDRangeKernel, cl.clFinish = enqueue, finish
        prepared.close()
    return calls


def launches_and_kernel_count(target, store, net, batch: int):
    """The launches the prepared net reports for one pass, and tinygrad's own count of the kernels one
    run() runs (GlobalCounters.kernel_count, which its runners add to as they run)."""
    from tinygrad.helpers import GlobalCounters

    from backends.peers.tinygrad_peer import TinygradInChild
    prepared = TinygradInChild(target, RunOptions(), store).prepare(net, init_weights(net, 0), batch)
    try:
        x = np.ones((batch,) + net.input_shape, np.float32)
        launches = prepared.launches(x)
        prepared.load_input(x)
        GlobalCounters.reset()
        prepared.run()
        return launches, GlobalCounters.kernel_count
    finally:
        prepared.close()


def copies_at_random_shapes(target, store, shapes: list[tuple[int, ...]], seed: int) -> list[tuple]:
    """tinygrad_peer's copies in and out of a device tensor, at each shape: (whether the allocator's own copy
    served it, the write then read back equal to the input, a reshaped view read equal, a permuted view (not the
    buffer in order: tinygrad's own path) read equal, and the OpenCL writes and reads and the runs of tinygrad's
    engine the first two copies made)."""
    from tinygrad import Device, Tensor
    from tinygrad.engine import realize
    from tinygrad.runtime.autogen import opencl as cl

    from backends.options import RunOptions
    from backends.peers.tinygrad_peer import TinygradInChild, _whole_buffer, copy_into, copy_out
    device = TinygradInChild(target, RunOptions(), store).device.tinygrad
    rng = np.random.default_rng(seed)
    calls = []
    write, read, engine = cl.clEnqueueWriteBuffer, cl.clEnqueueReadBuffer, realize.run_linear
    got = []
    for shape in shapes:
        x = rng.standard_normal(shape).astype(np.float32)
        t = Tensor.zeros(*shape, device=device).contiguous().realize()
        calls.clear()
        cl.clEnqueueWriteBuffer, cl.clEnqueueReadBuffer, realize.run_linear = (
            _recorded(calls, "write", write), _recorded(calls, "read", read), _recorded(calls, "engine", engine))
        try:
            copy_into(t, x)
            Device[device].synchronize()
            back = copy_out(t)
        finally:
            cl.clEnqueueWriteBuffer, cl.clEnqueueReadBuffer, realize.run_linear = write, read, engine
        direct = list(calls)
        flat = copy_out(t.reshape(-1))
        turned = t.permute(*reversed(range(len(shape))))
        got.append((_whole_buffer(t) is not None, bool(np.array_equal(back, x)),
                    bool(np.array_equal(flat, x.reshape(-1))), _whole_buffer(turned) is None,
                    bool(np.array_equal(copy_out(turned), x.transpose(*reversed(range(len(shape)))))), direct))
    return got
