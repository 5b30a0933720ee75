from stats import median


def main():
    assert median([3, 1, 2]) == 2
    assert median([4, 1, 3, 2]) == 2.5, "an even-length list has the mean of its two middle values"
    assert median([5]) == 5
    try:
        median([])
    except ValueError:
        pass
    else:
        raise AssertionError("empty input must raise ValueError")
    print("ok")


if __name__ == "__main__":
    main()
