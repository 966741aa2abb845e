"""Step 0, the configuration: the config schema and its defaults, the registries every step reads
(modes, tables, figures: catalog; device kinds: devices), the networks a run trains (networks) and
what a run's result depends on (depends). Torch-free: the Snakefile reads all of it on every call.
"""
