"""How every timing is taken honestly, by whichever step times: clocks that wait for the device
(timing), the machine-wide slot no two timed jobs share (slot), the evidence that the machine was
quiet (quality), the slowed stretches left out of a step time (slowed), a machine's identity (machines).
"""
