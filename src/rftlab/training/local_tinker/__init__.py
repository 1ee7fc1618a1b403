"""A local, in-process backend with the tinker SDK's interface: LoRA training (``cross_entropy`` and
``importance_sampling`` losses, Adam) and KV-cache sampling on a tiny Qwen3-architecture model or
any local Hugging Face model directory. The same client loop runs on ``tinker.ServiceClient`` or on
``LocalServiceClient``; see ``clients`` for the semantics and ``warm_start`` for the local GSM8K-style
task's supervised warm start."""

from .clients import LocalRestClient, LocalSamplingClient, LocalServiceClient, LocalTrainingClient
from .futures import LocalFuture
from .model import BUILTIN_MODELS, TINY_MODEL, build_tiny_model, byte_tokenizer, register_builtin_tokenizers

__all__ = [
    "BUILTIN_MODELS",
    "TINY_MODEL",
    "LocalFuture",
    "LocalRestClient",
    "LocalSamplingClient",
    "LocalServiceClient",
    "LocalTrainingClient",
    "build_tiny_model",
    "byte_tokenizer",
    "register_builtin_tokenizers",
]
