package grpcgov_test

import (
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	governor "governor.dev/governor/sdk"
	grpcgov "governor.dev/governor/sdk/grpc"
	"governor.dev/governor/sdk/rules"
)

func Example() {
	g, err := governor.New(governor.DefaultOptions("inventory"))
	if err != nil {
		panic(err)
	}
	defer g.Close()

	// Server side: admit every call; refusals become ResourceExhausted or
	// Unavailable.
	srv := grpc.NewServer(
		grpc.UnaryInterceptor(grpcgov.UnaryServerInterceptor(g, grpcgov.ServerOptions{})),
		grpc.StreamInterceptor(grpcgov.StreamServerInterceptor(g, grpcgov.ServerOptions{})),
	)
	defer srv.Stop()

	// Client side: protect calls to a downstream named by its target. The
	// Governor hands each ruleset's downstreams to its outbound set.
	rs := governor.DefaultRuleset("inventory")
	rs.Downstreams = []rules.Downstream{{Name: "dns:///pricing:443", Breaker: &rules.Breaker{}, Retry: &rules.Retry{}}}
	if err := g.Apply(rs, 1); err != nil {
		panic(err)
	}
	set := g.Outbound()
	ci, err := grpcgov.UnaryClientInterceptor(grpcgov.ClientOptions{Set: set, Idempotent: grpcgov.AllMethods})
	if err != nil {
		panic(err)
	}
	cc, err := grpc.NewClient("dns:///pricing:443",
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithUnaryInterceptor(ci))
	if err != nil {
		panic(err)
	}
	defer cc.Close()
	fmt.Println(set.Names())
	// Output: [dns:///pricing:443]
}
