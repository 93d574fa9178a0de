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
    RequestEncoder,
)
from stead.providers._strings import (
    FORMS,
    LazyModel,
    ModelSpec,
    model_from_string,
    parse_model_string,
)

__all__ = [
    "FORMS",
    "LazyModel",
    "ModelCall",
    "ModelProvider",
    "ModelRequest",
    "ModelResponse",
    "ModelSpec",
    "ProgressCallback",
    "RequestEncoder",
    "model_from_string",
    "parse_model_string",
]
