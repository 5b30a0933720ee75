"""The package-index and forge stand-ins' contents shared by the adapt and track tests: wheels of several
releases per framework with their registries at their real paths, and the forge's PRs and issues."""

from __future__ import annotations

from tests.support import registry_excerpts as ex
from tests.support.index_server import ForgeServer, IndexServer, gh_item

KDA_MODEL = "class KimiDeltaAttention(nn.Module):\n    kv_lora_rank = 512\n    def forward(self): return chunk_kda()\n"
K3_MODEL = KDA_MODEL + "class AttnRes:\n    attn_res = True\nlatent_moe = 1\nshared_experts = 2\n"
VLLM_OLD = '_TEXT_GENERATION_MODELS = {\n    "LlamaForCausalLM": ("llama", "LlamaForCausalLM"),\n}\n'
VLLM_K3 = ex.VLLM_REGISTRY.replace('    "LlamaForCausalLM": ("llama", "LlamaForCausalLM"),\n',
                                   '    "LlamaForCausalLM": ("llama", "LlamaForCausalLM"),\n'
                                   '    "KimiK3ForConditionalGeneration": ("kimi_k3", "KimiK3Model"),\n')
GGUF_OLD = ex.GGUF_CONSTANTS.replace('    MODEL_ARCH.KIMI_LINEAR:      "kimi-linear",\n', "")
REG = "vllm/model_executor/models/registry.py"


def populate(index: IndexServer) -> None:
    """Several releases of every framework, each with its registry at its real path."""
    index.add("vllm", "0.9.0", {REG: VLLM_OLD, "vllm/model_executor/models/llama.py": "class LlamaForCausalLM: pass"})
    index.add("vllm", "0.10.0", {REG: ex.VLLM_REGISTRY, "vllm/model_executor/models/kimi_linear.py": KDA_MODEL})
    index.add("vllm", "0.11.0", {REG: VLLM_K3, "vllm/model_executor/models/kimi_linear.py": KDA_MODEL,
                                 "vllm/model_executor/models/kimi_k3.py": K3_MODEL,
                                 "vllm/model_executor/layers/quantization/mxfp4.py": "class Mxfp4Config: pass"})
    index.add("vllm", "0.12.0rc1", {REG: VLLM_K3})   # a pre-release: not read
    index.add("sglang", "0.4.0", {"sglang/srt/models/llama.py": "EntryClass = [LlamaForCausalLM]\n"})
    index.add("sglang", "0.5.0", {"sglang/srt/models/llama.py": "EntryClass = [LlamaForCausalLM]\n",
                                  "sglang/srt/models/kimi_linear.py": KDA_MODEL + ex.SGLANG_MODEL_FILE_TAIL})
    auto = "transformers/models/auto/"
    index.add("transformers", "4.50.0", {auto + "modeling_auto.py": "MODEL_MAPPING_NAMES = OrderedDict([])\n",
                                         auto + "configuration_auto.py": "CONFIG_MAPPING_NAMES = OrderedDict([])\n"})
    index.add("transformers", "4.57.0", {auto + "modeling_auto.py": ex.TRANSFORMERS_MODELING_AUTO,
                                         auto + "auto_mappings.py": ex.TRANSFORMERS_AUTO_MAPPINGS,
                                         "transformers/models/kimi_linear/modeling_kimi_linear.py": KDA_MODEL})
    index.add("gguf", "0.17.0", {"gguf/constants.py": GGUF_OLD})
    index.add("gguf", "0.18.0", {"gguf/constants.py": ex.GGUF_CONSTANTS})
    index.add("mlx-lm", "0.28.0", {"mlx_lm/utils.py": ex.MLX_UTILS, "mlx_lm/models/llama.py": "class Model: pass"})
    index.add("mlx-lm", "0.30.0", {"mlx_lm/utils.py": ex.MLX_UTILS, "mlx_lm/models/kimi_linear.py": KDA_MODEL})


def populate_forge(forge: ForgeServer) -> None:
    repo = "vllm-project/vllm"
    forge.items[repo] = [gh_item(repo, 101, "[Model] Kimi-K3 support", "pr", draft=True),
                         gh_item(repo, 102, "Add KimiLinear", "pr", state="closed", merged=True, labels=("new-model",)),
                         gh_item(repo, 103, "[Feature]: KimiK3 support?", "issue", state="closed"),
                         gh_item(repo, 104, "KDA kernels", "pr", state="closed"),
                         gh_item(repo, 105, "kimi_linear crashes", "issue")]
