"""A local, in-process backend with the tinker SDK's interface: LoRA training (the ``cross_entropy``,
``importance_sampling``, ``ppo``, ``cispo`` and ``dro`` losses, Adam) and KV-cache sampling on a tiny
Qwen3-architecture model or any local Hugging Face model directory. The same client loop runs on ``tinker.ServiceClient`` or on
``LocalServiceClient``; see ``clients`` for the semantics (its training and sampling clients are
``training_client`` and ``sampling_client``) and ``warm_start`` for the local GSM8K-style task's
supervised warm start. ``server`` (``rftlab serve tinker``) puts the same backend behind the tinker SDK's
HTTP protocol (``service`` holds its sessions, models, samplers and futures, in ``service_*`` parts;
``wire`` its protobuf codec; ``checkpoints`` the on-disk ``tinker://`` checkpoints both share)."""

from .clients import LocalRestClient, LocalServiceClient
from .futures import LocalFuture
from .model import BUILTIN_MODELS, TINY_MODEL, build_tiny_model, byte_tokenizer, register_builtin_tokenizers
from .sampling_client import LocalSamplingClient
from .training_client import LocalTrainingClient

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
