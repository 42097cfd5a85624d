from calls import run_all


def test_batch_of_five():
    out = run_all(5)
    assert out["Tagger"].shape == (5, 4, 11)
