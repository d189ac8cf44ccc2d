"""The runtime: model files, the executor, placement and the machine's
profile. It imports nothing above it.
"""
