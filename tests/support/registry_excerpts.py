"""Short real registry excerpts, one per framework, as each writes its registry today (test fixtures).

Sources (read by archprobe itself over HTTP Range, or from the public repository):
- vLLM: github.com/vllm-project/vllm @ 0002bff0b6cb36a3c8a17364de3303664463c412,
  vllm/model_executor/models/registry.py (_TEXT_GENERATION_MODELS, _TRANSFORMERS_SUPPORTED_MODELS,
  _TRANSFORMERS_BACKEND_MODELS, _PREVIOUSLY_SUPPORTED_MODELS; entries cut down)
- SGLang: PyPI sglang-0.5.23 wheel, sglang/srt/models/kimi_linear.py (its last line)
- transformers: PyPI transformers-5.24.0 wheel, transformers/models/auto/modeling_auto.py and
  auto_mappings.py (entries cut down)
- llama.cpp: PyPI gguf-0.19.0 wheel, gguf/constants.py (MODEL_ARCH_NAMES and MODEL_TENSORS, cut down)
- MLX-LM: PyPI mlx_lm-0.32.2 wheel, mlx_lm/utils.py (MODEL_REMAPPING, cut down)
"""

VLLM_REGISTRY = '''
_TEXT_GENERATION_MODELS = {
    # [Decoder-only]
    "AfmoeForCausalLM": ("afmoe", "AfmoeForCausalLM"),
    "DeepseekV3ForCausalLM": ("deepseek_v2", "DeepseekV3ForCausalLM"),
    "KimiLinearForCausalLM": ("kimi_linear", "KimiLinearForCausalLM"),  # noqa: E501
    "LlamaForCausalLM": ("llama", "LlamaForCausalLM"),
}

_EMBEDDING_MODELS = {
    "LlamaModel": ("llama", "LlamaForCausalLM"),
    **{
        # Multiple models share the same architecture, so we include them all
        k: (mod, arch)
        for k, (mod, arch) in _TEXT_GENERATION_MODELS.items()
        if arch == "LlamaForCausalLM"
    },
}

_TRANSFORMERS_SUPPORTED_MODELS = {
    # Text generation models
    "SmolLM3ForCausalLM": ("transformers", "TransformersForCausalLM"),
}

_TRANSFORMERS_BACKEND_MODELS = {
    # Text generation models
    "TransformersForCausalLM": ("transformers", "TransformersForCausalLM"),
}

_PREVIOUSLY_SUPPORTED_MODELS = {
    "MotifForCausalLM": "0.10.2",
    "Phi3SmallForCausalLM": "0.9.2",
}
'''

SGLANG_MODEL_FILE_TAIL = '''
EntryClass = KimiLinearForCausalLM
'''

TRANSFORMERS_MODELING_AUTO = '''
MODEL_FOR_CAUSAL_LM_MAPPING_NAMES = OrderedDict(
    [
        # Model for Causal LM mapping
        ("apertus", "ApertusForCausalLM"),
        ("kimi_linear", "KimiLinearForCausalLM"),
        ("llama", "LlamaForCausalLM"),
    ]
)
'''

TRANSFORMERS_AUTO_MAPPINGS = '''
CONFIG_MAPPING_NAMES = OrderedDict(
    [
        ("kimi_k25", "Kimi_K25Config"),
        ("kimi_linear", "KimiLinearConfig"),
    ]
)
'''

GGUF_CONSTANTS = '''
class MODEL_ARCH(IntEnum):
    MMPROJ           = auto() # dummy arch for clip.cpp
    LLAMA            = auto()
    KIMI_LINEAR      = auto()


MODEL_ARCH_NAMES: dict[MODEL_ARCH, str] = {
    MODEL_ARCH.MMPROJ:           "clip", # dummy arch for clip.cpp
    MODEL_ARCH.LLAMA:            "llama",
    MODEL_ARCH.KIMI_LINEAR:      "kimi-linear",
}

MODEL_TENSORS: dict[MODEL_ARCH, list[MODEL_TENSOR]] = {
    MODEL_ARCH.KIMI_LINEAR: [
        MODEL_TENSOR.TOKEN_EMBD,
        MODEL_TENSOR.ATTN_Q_A,
        MODEL_TENSOR.ATTN_KV_A_MQA,
        MODEL_TENSOR.FFN_GATE_EXP,
        MODEL_TENSOR.SSM_CONV1D_Q,
    ],
}
'''

MLX_UTILS = '''
MODEL_REMAPPING = {
    "mistral": "llama",
    "llava": "mistral3",
    "kimi_k2": "deepseek_v3",
}
'''
