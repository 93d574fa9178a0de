"""Model providers: the protocol and its adapters."""

from stead.providers._base import ModelProvider, ModelRequest, ModelResponse, ProgressCallback

__all__ = ["ModelProvider", "ModelRequest", "ModelResponse", "ProgressCallback"]
