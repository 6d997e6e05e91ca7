"""``python -m nanovllm_teach.cli``: the nanovllm-teach command without the installed script."""

import sys

from nanovllm_teach.cli import main

sys.exit(main())
