// A franz-go consumer with the client's defaults: a group member, offsets auto-committed every 5 s
// (of what PollFetches returned), one Postgres insert (pgx) per payment, with the worker and attempt
// that applied it.
//
// Build (pinned: go.mod and go.sum), from the repository root:
//
//	(cd examples/consumers/franz-go && go build -o franz-go-consumer .)
//
// Run it under the harness:
//
//	harness run custom --worker-cmd examples/consumers/franz-go/franz-go-consumer \
//	    --expect at-least-once --kills 10 --workers 2 --partitions 2 --messages 3000 --seed 1
//
// The client.id is HARNESS_CLIENT_ID, so the harness can tell which member is which process. It
// reads HARNESS_POSTGRES_DSN_NO_REQUIRE_AUTH: pgx would send require_auth to the server as a setting.
// The cluster's login is HARNESS_KAFKA_CONFIG: PLAINTEXT ({}) or SASL_PLAINTEXT with SCRAM-SHA-512 or
// SCRAM-SHA-256 (the harness's stacks); anything else is refused with one line.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

type payment struct {
	ID     string `json:"id"`
	Amount int64  `json:"amount"`
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "franz-go example: "+format+"\n", args...)
	os.Exit(2)
}

// login is the cluster's login (HARNESS_KAFKA_CONFIG, librdkafka's names) as franz-go options.
func login() []kgo.Opt {
	settings := map[string]string{}
	if raw := strings.TrimSpace(os.Getenv("HARNESS_KAFKA_CONFIG")); raw != "" {
		if err := json.Unmarshal([]byte(raw), &settings); err != nil {
			fail("HARNESS_KAFKA_CONFIG is not a JSON object of strings")
		}
	}
	for k := range settings {
		switch k {
		case "security.protocol", "sasl.mechanism", "sasl.username", "sasl.password":
		default:
			fail("no mapping for the Kafka setting %s", k)
		}
	}
	switch p := strings.ToUpper(settings["security.protocol"]); p {
	case "", "PLAINTEXT":
		return nil
	case "SASL_PLAINTEXT":
	default:
		fail("security.protocol %s is not supported", p)
	}
	auth := scram.Auth{User: settings["sasl.username"], Pass: settings["sasl.password"]}
	switch m := settings["sasl.mechanism"]; m {
	case "SCRAM-SHA-512":
		return []kgo.Opt{kgo.SASL(auth.AsSha512Mechanism())}
	case "SCRAM-SHA-256":
		return []kgo.Opt{kgo.SASL(auth.AsSha256Mechanism())}
	default:
		fail("sasl.mechanism %s is not supported", m)
	}
	return nil
}

func main() {
	attempt, err := strconv.Atoi(os.Getenv("HARNESS_ATTEMPT"))
	if err != nil {
		fail("HARNESS_ATTEMPT is not a number")
	}
	worker, ledger := os.Getenv("HARNESS_WORKER"), os.Getenv("HARNESS_LEDGER_TABLE")
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer cancel()
	cl, err := kgo.NewClient(append(login(),
		kgo.SeedBrokers(strings.Split(os.Getenv("HARNESS_BOOTSTRAP_SERVERS"), ",")...),
		kgo.ConsumerGroup(os.Getenv("HARNESS_GROUP_ID")),
		kgo.ConsumeTopics(os.Getenv("HARNESS_INPUT_TOPIC")),
		kgo.ClientID(os.Getenv("HARNESS_CLIENT_ID")),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)...)
	if err != nil {
		fail("%v", err)
	}
	defer cl.Close() // commits what was polled, then leaves the group
	db, err := pgx.Connect(context.Background(), os.Getenv("HARNESS_POSTGRES_DSN_NO_REQUIRE_AUTH"))
	if err != nil {
		fail("cannot connect to PostgreSQL: %v", err)
	}
	defer db.Close(context.Background())
	insert := "insert into " + ledger + " (message_id, amount, worker, attempt) values ($1, $2, $3, $4)"
	for ctx.Err() == nil {
		fetches := cl.PollFetches(ctx)
		var failed error
		fetches.EachRecord(func(r *kgo.Record) {
			if failed != nil {
				return
			}
			var p payment
			if err := json.Unmarshal(r.Value, &p); err != nil {
				failed = err
				return
			}
			_, failed = db.Exec(context.Background(), insert, p.ID, p.Amount, worker, attempt)
		})
		if failed != nil {
			fail("%v", failed)
		}
	}
}
