"""klaunch from Python: every launcher of every spec, with the C launchers'
checks, plus the ones only Python can make.

Each kernel family F has a generated module, klaunch_F (import it), with one
function per launcher; this package is what they share: the exceptions,
one class per kl_status of KL_STATUS_LIST (klaunch/klaunch.h), all derived
from klaunch.Error, and Module and Record. docs/PYTHON.md has the rest.

    import torch, klaunch, klaunch_paged_decode as pd
    try:
        pd.paged_decode_attn_bf16_gqa(q, k_cache, v_cache, out, tables, lens, max_blocks, num_seqs,
                                      32, 4, 128, 16, 128 ** -0.5, 32 * 128, 0)
    except klaunch.PreconditionError as e:
        print(e)   # KL_ERROR_PRECONDITION: kl_paged_decode_attn_bf16_gqa: precondition ...
"""

from . import _errors
from ._errors import BY_NAME as STATUS_CLASSES  # noqa: F401  status name -> class
from ._errors import Error, error_class  # noqa: F401
from ._family import Module, Record, TensorMap  # noqa: F401

__version__ = "0.1.0"

globals().update(_errors.CLASSES)

__all__ = ["Error", "Module", "Record", "TensorMap", "error_class", "STATUS_CLASSES"] + sorted(_errors.CLASSES)
