"""``python -m spur.config [--markdown]``: print the default spur.conf, or the docs' key reference."""

import sys

from spur.config.dump import dump_defaults, reference_markdown

sys.stdout.write(reference_markdown() if "--markdown" in sys.argv[1:] else dump_defaults())
