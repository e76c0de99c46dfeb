"""The support matrix of the attention stack (recipes/support/matrix.toml) and its reader: what each
attention kernel supports, by release (GPU architectures, dtypes, head sizes, features), each row
with its source. explain, check and trace read the same table through ``matrix()``.

Standard library only and no import from the rest of the package (the ground floor of the layering
contract): the tracer reads it inside the traced interpreter too.
"""

from .table import (  # noqa: F401
    DTYPE_WORDS,
    DTYPES,
    FEATURE_WORDS,
    FEATURES,
    JSON_NAME,
    Kernel,
    Matrix,
    Row,
    SupportMatrixError,
    arch_of,
    load,
    matrix,
    sm_name,
    validate,
    version_matches,
    write_json,
)
