"""Top-layer specialization on cached features (Gaussian class clusters stand in for a template)."""

import numpy as np

from vidnexus.specialization.training import FeatureCache, accuracy_terms, specialize


def clusters(per_class, classes=20, dim=16, seed=0):
    rng = np.random.default_rng(seed)
    centers = np.random.default_rng(99).normal(0, 3, (classes, dim))
    ys = np.repeat(np.arange(classes), per_class)
    xs = centers[ys] + rng.normal(0, 1, (len(ys), dim))
    return FeatureCache(xs.astype(np.float32), ys)


def test_specialized_head_keeps_dominant_classes_and_calls_the_rest_other():
    train, val = clusters(50), clusters(20, seed=1)
    head = specialize(train, (3, 7, 11))
    pred = head.predict(val.feats)
    inside = np.isin(val.labels, (3, 7, 11))
    assert (pred[inside] == val.labels[inside]).mean() > 0.95
    assert (pred[~inside] == -1).mean() > 0.9
    assert head.dominant == (3, 7, 11) and head.train_seconds < 5


def test_training_skew_is_fixed_whatever_the_input_skew():
    # With skew 0.6, 3 dominant classes × 50 = 150 examples and 100 "other" examples.
    train = clusters(50)
    h1 = specialize(train, (0, 1, 2), skew=0.6, steps=1)
    assert h1.weight.shape == (4, 16)


def test_accuracy_terms_per_dominant_set_size():
    train, val = clusters(40), clusters(20, seed=2)
    a_in, e_io, a_out = accuracy_terms(train, val, 4, trials=3, classes=20)
    assert a_in > 0.9 and e_io < 0.1 and a_out > 0.85
