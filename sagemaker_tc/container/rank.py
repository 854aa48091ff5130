"""One torchrun rank: ``python -m sagemaker_tc.container.rank SCRIPT [ARGS...]`` runs the user's
script under the launcher (the parent launcher already configured the environment)."""

import sys

from sagemaker_tc.container.launcher import run

if __name__ == "__main__":
    run(sys.argv[1], sys.argv[2:], program=True)
