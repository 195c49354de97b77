module governor.dev/governor/bench

go 1.26

require governor.dev/governor/sdk v0.0.0

replace governor.dev/governor/sdk => ../sdk
