"""The tqdm progress bar keeps stepsim._ground.progress's interface and its on/off rules."""

import io

import pytest

from stepsim._ground.progress import Progress


class Tty(io.StringIO):
    def isatty(self):
        return True


def test_bar_draws_done_total_elapsed_and_eta_and_never_passes_the_total():
    stream = io.StringIO()
    with Progress(10, "sweep", force=True, stream=stream, initial=2, unit="run") as bar:
        bar.update(3)
        bar.update(100)  # clipped at the total
        assert bar.done == 10
    text = stream.getvalue()
    assert "sweep" in text and "10/10" in text and "run/s" in text
    assert "2/10" in text  # a resumed job starts at its finished runs
    assert "<" in text  # tqdm's [elapsed<remaining]


@pytest.mark.parametrize("env, force, tty, shown", [
    (None, None, False, False),   # a log file: no bar
    (None, None, True, True),     # a terminal: a bar
    ("0", None, True, False),     # STEPSIM_PROGRESS=0 silences terminals
    ("1", None, False, True),     # STEPSIM_PROGRESS=1 forces it on
    ("1", False, True, False),    # an explicit force wins over the environment
])
def test_when_the_bar_is_shown(env, force, tty, shown, monkeypatch):
    if env is None:
        monkeypatch.delenv("STEPSIM_PROGRESS", raising=False)
    else:
        monkeypatch.setenv("STEPSIM_PROGRESS", env)
    stream = Tty() if tty else io.StringIO()
    with Progress(5, "fit", force=force, stream=stream) as bar:
        bar.update(5)
    assert bar.enabled is shown
    assert bool(stream.getvalue()) is shown
