from calls import run_all


def test_batch_of_three():
    out = run_all(3)
    assert out["Tagger"].shape == (3, 4, 11)
