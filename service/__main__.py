"""``python -m service``: the ``boostbandit`` command line (:mod:`service.cli`)."""

from service.cli import app

if __name__ == "__main__":
    app(prog_name="boostbandit")
