# vidnexus — the two commands:
#   make demo   bootstrap the virtualenv and run the embedded end-to-end demo
#   make test   bootstrap, type-check, install + start Kafka and ClickHouse, run unit + integration tests, stop
.PHONY: demo test unit typecheck bootstrap peers-venv services-up services-down bench-quick clean-venv

demo:
	@bash scripts/demo.sh

test:
	@bash scripts/test.sh

unit:
	@VENV=$$(bash scripts/bootstrap.sh) && "$$VENV/bin/python" -m pytest tests/unit tests/sim -q

typecheck:
	@VENV=$$(bash scripts/bootstrap.sh) && "$$VENV/bin/python" -m mypy vidnexus

bootstrap:
	@bash scripts/bootstrap.sh

peers-venv:
	@bash scripts/peers-venv.sh

services-up:
	@VENV=$$(bash scripts/bootstrap.sh) && "$$VENV/bin/vidnexus" services up

services-down:
	@VENV=$$(bash scripts/bootstrap.sh) && "$$VENV/bin/vidnexus" services down

bench-quick:
	@VENV=$$(bash scripts/bootstrap.sh) && "$$VENV/bin/vidnexus" bench drop-policies --quick
