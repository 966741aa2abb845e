"""Step 3, training: one device x network x mode x batch size x repeat, timed (trainer, runner), by
the mode ladder (modes, with nets, the C kernel and the Triton kernels), served by a warm worker
(worker), profiled apart (profiling), written as a row and a record (records). Imports no torch itself.
"""
