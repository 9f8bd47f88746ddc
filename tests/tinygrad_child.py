"""Checks that look inside the tinygrad backend's child process, where
tinygrad runs (tests/test_tinygrad.py calls them there)."""
import numpy as np

from backends.options import RunOptions
from nets.weights import init_weights


def calls_during_run(target, store, net, batch: int) -> list[str]:
    """The OpenCL calls tinygrad makes in one run() of a prepared net: kernel enqueues and queue finishes,
    in order (through tinygrad's own binding, which its CL runtime looks up at each call)."""
    from tinygrad.runtime.autogen import opencl as cl

    from backends.peers.tinygrad_peer import TinygradInChild
    prepared = TinygradInChild(target, RunOptions(), store).prepare(net, init_weights(net, 0), batch)
    prepared.load_input(np.ones((batch,) + net.input_shape, np.float32))
    calls = []
    enqueue, finish = cl.clEnqueueNDRangeKernel, cl.clFinish

    def enqueued(*args):
        calls.append("kernel")
        return enqueue(*args)

    def finished(*args):
        calls.append("finish")
        return finish(*args)
    cl.clEnqueueNDRangeKernel, cl.clFinish = enqueued, finished
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
