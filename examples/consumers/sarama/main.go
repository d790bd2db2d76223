// A Sarama consumer-group member with the client's defaults: offsets auto-committed every 1 s (of what
// was marked), each payment marked after its Postgres insert (pgx), one ledger row per payment with
// the worker and attempt that applied it. The only settings changed from Sarama's defaults are the
// ones a team must change: the client.id, the oldest offset for a group with no commit (Sarama's
// default is the newest, which would skip the run's payments), and the cluster's login.
//
// Build (pinned: go.mod and go.sum), from the repository root:
//
//	(cd examples/consumers/sarama && go build -o sarama-consumer .)
//
// Run it under the harness:
//
//	harness run custom --worker-cmd examples/consumers/sarama/sarama-consumer \
//	    --expect at-least-once --kill-mode random --kills 10 --workers 2 --partitions 2 --messages 3000 --seed 1
//
// The client.id is HARNESS_CLIENT_ID, so the harness can tell which member is which process. The
// cluster's login is HARNESS_KAFKA_CONFIG: PLAINTEXT ({}) or SASL_PLAINTEXT with SCRAM-SHA-512 or
// SCRAM-SHA-256 (the harness's stacks); anything else is refused with one line. It reads
// HARNESS_POSTGRES_DSN_NO_REQUIRE_AUTH: pgx would send require_auth to the server as a setting.
package main

import (
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/IBM/sarama"
	"github.com/jackc/pgx/v5"
	"github.com/xdg-go/scram"
)

type payment struct {
	ID     string `json:"id"`
	Amount int64  `json:"amount"`
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "sarama example: "+format+"\n", args...)
	os.Exit(2)
}

// scramClient is Sarama's SCRAMClient on xdg-go/scram (the way Sarama's own example does it).
type scramClient struct {
	hash scram.HashGeneratorFcn
	conv *scram.ClientConversation
}

func (s *scramClient) Begin(user, password, authzID string) error {
	c, err := s.hash.NewClient(user, password, authzID)
	if err != nil {
		return err
	}
	s.conv = c.NewConversation()
	return nil
}

func (s *scramClient) Step(challenge string) (string, error) { return s.conv.Step(challenge) }
func (s *scramClient) Done() bool                            { return s.conv.Done() }

// login applies HARNESS_KAFKA_CONFIG (librdkafka's names) to Sarama's config.
func login(conf *sarama.Config) {
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
	switch p := settings["security.protocol"]; p {
	case "", "PLAINTEXT", "plaintext":
		return
	case "SASL_PLAINTEXT", "sasl_plaintext":
	default:
		fail("security.protocol %s is not supported", p)
	}
	conf.Net.SASL.Enable = true
	conf.Net.SASL.User, conf.Net.SASL.Password = settings["sasl.username"], settings["sasl.password"]
	switch m := settings["sasl.mechanism"]; m {
	case "SCRAM-SHA-512":
		conf.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
		conf.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{hash: sha512.New} }
	case "SCRAM-SHA-256":
		conf.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA256
		conf.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{hash: sha256.New} }
	default:
		fail("sasl.mechanism %s is not supported", m)
	}
}

// handler applies each claimed payment, then marks it: the next auto-commit (every 1 s) commits it.
type handler struct {
	db             *pgx.Conn
	insert, worker string
	attempt        int
}

func (h *handler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *handler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *handler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case msg, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			var p payment
			if err := json.Unmarshal(msg.Value, &p); err != nil {
				return err
			}
			if _, err := h.db.Exec(context.Background(), h.insert, p.ID, p.Amount, h.worker, h.attempt); err != nil {
				return err
			}
			sess.MarkMessage(msg, "")
		case <-sess.Context().Done():
			return nil
		}
	}
}

func main() {
	attempt, err := strconv.Atoi(os.Getenv("HARNESS_ATTEMPT"))
	if err != nil {
		fail("HARNESS_ATTEMPT is not a number")
	}
	conf := sarama.NewConfig()
	conf.ClientID = os.Getenv("HARNESS_CLIENT_ID")
	conf.Consumer.Offsets.Initial = sarama.OffsetOldest
	login(conf)
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer cancel()
	db, err := pgx.Connect(context.Background(), os.Getenv("HARNESS_POSTGRES_DSN_NO_REQUIRE_AUTH"))
	if err != nil {
		fail("cannot connect to PostgreSQL: %v", err)
	}
	defer db.Close(context.Background())
	group, err := sarama.NewConsumerGroup(strings.Split(os.Getenv("HARNESS_BOOTSTRAP_SERVERS"), ","),
		os.Getenv("HARNESS_GROUP_ID"), conf)
	if err != nil {
		fail("%v", err)
	}
	defer group.Close() // commits what was marked, then leaves the group
	h := &handler{db: db, worker: os.Getenv("HARNESS_WORKER"), attempt: attempt,
		insert: "insert into " + os.Getenv("HARNESS_LEDGER_TABLE") + " (message_id, amount, worker, attempt) values ($1, $2, $3, $4)"}
	topics := []string{os.Getenv("HARNESS_INPUT_TOPIC")}
	for ctx.Err() == nil {
		if err := group.Consume(ctx, topics, h); err != nil && ctx.Err() == nil {
			fail("%v", err)
		}
	}
}
