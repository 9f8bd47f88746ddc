"""clblast-compare: does CLBlast make a good neural-network engine on this
OpenCL device, or do hand-written kernels beat it, and by how much?"""

__version__ = "0.1.0"
