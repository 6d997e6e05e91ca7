"""nanovllm_teach: a complete nano-vllm-style inference engine that explains itself.

    from nanovllm_teach import LLM, SamplingParams
    llm = LLM()                      # the shipped Qwen3 checkpoint, on CPU
    outs = llm.generate(["..."], SamplingParams(temperature=0.6, max_tokens=64))
"""

__version__ = "0.1.0"
__all__ = ["LLM", "SamplingParams", "RequestOutput", "CompletionOutput", "default_model_path", "__version__"]


def __getattr__(name: str):
    # The engine pulls in torch and transformers; trace/viz users importing the package must not pay for it,
    # and importing the package loads nothing else and changes nothing in the environment.
    if name == "LLM":
        from nanovllm_teach.llm import LLM
        return LLM
    if name == "SamplingParams":
        from nanovllm_teach.sampling_params import SamplingParams
        return SamplingParams
    if name == "default_model_path":
        from nanovllm_teach.assets import default_model_path
        return default_model_path
    if name in ("RequestOutput", "CompletionOutput"):
        from nanovllm_teach import outputs
        return getattr(outputs, name)
    raise AttributeError(f"module 'nanovllm_teach' has no attribute {name!r}")
