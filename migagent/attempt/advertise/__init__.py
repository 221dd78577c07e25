"""The advertisement: what Node allocatable must show for what the GPUs hold (expected, expectation,
sharing_source), and the attempt's wait until it does (readvertise)."""
