"""The car colour recognizer's real training data: the traffic app's own tracker over the real
parking-lot video, each moving car's crops labelled from the hand labels, split by second into
training and held-out crops."""

from __future__ import annotations

from collections import Counter

from vidnexus.apps.traffic.models import COLOUR_NAMES, real_crops, split_real


def test_every_labelled_car_gives_crops_in_both_splits_and_no_frame_is_in_both():
    crops = real_crops()
    cars = Counter(car for _, _, _, car in crops)
    assert set(cars) == {"white sedan", "silver car", "red car", "white sports car"}, cars
    assert all(n >= 8 for n in cars.values()), cars
    colours = {car: COLOUR_NAMES[y] for _, _, y, car in crops}
    assert colours == {"white sedan": "white", "silver car": "silver", "red car": "red", "white sports car": "white"}
    train, test = split_real(crops)
    assert {c[3] for c in train} == {c[3] for c in test} == set(cars)
    assert not {c[0] for c in train} & {c[0] for c in test}
    assert all(c[1].ndim == 3 and min(c[1].shape[:2]) >= 4 for c in crops)
