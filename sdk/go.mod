module governor.dev/governor/sdk

go 1.26
