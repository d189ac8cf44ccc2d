"""One library step at a time that swaps the process's functions for its own duration.

Transformers builds a model under contexts (`transformers.initialization.no_init_weights`,
`no_tie_weights`) that replace `PreTrainedModel.init_weights`, `tie_weights` and
`torch.nn.init`'s functions with stand-ins and put back what they found on leaving. Two
threads building at once (the engine loads the sentence scorer and a chosen embedder
side by side) can each put back the other's stand-in: weight tying and initialisation
then stay off for the life of the process (a model built later has an untied head).
torch's ONNX exporter keeps its state in one process-wide flag too
(`GLOBALS.in_onnx_export`): two exports at once fail each other.

The lock is the module's because the state it guards is the process's. Re-entrant: an
export may load the model it exports.
"""

import threading
from contextlib import AbstractContextManager

_ONE_AT_A_TIME = threading.RLock()


def one_at_a_time() -> AbstractContextManager[bool]:
    """Hold while building a transformers model or exporting one."""
    return _ONE_AT_A_TIME
