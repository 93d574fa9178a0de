"""Model providers: the protocol, and adapters for Anthropic, OpenAI and OpenAI-compatible servers.

    from stead.providers import model_from_string
    model = model_from_string("anthropic:claude-sonnet-4-5")

The adapters live in ``stead.providers.anthropic`` and ``stead.providers.openai`` and import
their SDK (``pip install 'stead[anthropic]'``, ``'stead[openai]'``) only when used.
"""

from stead.providers._base import (
    ModelCall,
    ModelProvider,
    ModelRequest,
    ModelResponse,
    ProgressCallback,
)
from stead.providers._failures import failure_code
from stead.providers._strings import (
    LazyModel,
    ModelSpec,
    model_from_string,
    parse_model_string,
)

__all__ = [
    "LazyModel",
    "ModelCall",
    "ModelProvider",
    "ModelRequest",
    "ModelResponse",
    "ModelSpec",
    "ProgressCallback",
    "failure_code",
    "model_from_string",
    "parse_model_string",
]

# For the other packages of stead, not part of the public API (hence not in __all__): the
# forms a model string takes, and the encoder the run loop keeps per agent.
from stead.providers._base import RequestEncoder as RequestEncoder
from stead.providers._strings import FORMS as FORMS
