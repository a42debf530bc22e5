# Site-wide defaults of the Pi kernel on a JupyterHub (see docs/jupyterhub.md).
#
# Install as /etc/ipython/ipython_kernel_config.py (every user's kernels read it),
# or as {sys.prefix}/etc/ipython/ipython_kernel_config.py of the environment the
# kernels run in. No API key goes here: keys come from the spawner's environment.
c = get_config()  # noqa: F821 - provided by the config loader

# The OpenAI-compatible server every request goes to: a gateway your site runs
# (LiteLLM, vLLM, Ollama, ...) or a hosted API. Its key is OPENAI_API_KEY in the
# environment of each user's server.
c.PiKernel.base_url = "https://llm-gateway.example.org/v1"

# The model a new session starts with.
c.PiKernel.model = "gpt-4o-mini"

# The models `%pi model` and `%%pi --model` may choose: model ids (from any
# provider) or provider:id, shell-style wildcards allowed. Unset: any model.
c.PiKernel.allowed_models = ["gpt-4o-mini", "gpt-4o", "deepseek-chat", "qwen3*"]

# Tool calls ask before they run; an unanswered request is denied after 5 minutes.
c.PiKernel.approval = "ask"
c.PiKernel.approval_timeout = 300

# What one session may spend on model requests, in US dollars (%pi budget shows
# and changes it): once spent, the next request is refused with a clear message.
c.PiKernel.budget = 5.0
