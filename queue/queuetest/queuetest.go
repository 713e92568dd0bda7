// Package queuetest runs an embedded NATS JetStream server for tests of the queue and of
// the commands that use it: no external service is needed. Only tests import it.
package queuetest

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Server is an embedded JetStream server listening on a local port, with its store in a
// test's temporary folder; Restart brings it back on the same port and store.
type Server struct {
	t    testing.TB
	dir  string
	port int
	srv  *server.Server
}

// Start starts a server that the test's cleanup shuts down.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{t: t, dir: t.TempDir(), port: -1}
	s.start()
	t.Cleanup(func() { s.srv.Shutdown(); s.srv.WaitForShutdown() })
	return s
}

func (s *Server) start() {
	s.t.Helper()
	srv, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: s.port, JetStream: true, StoreDir: s.dir, NoLog: true, NoSigs: true,
	})
	if err != nil {
		s.t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		s.t.Fatal("the NATS server did not start")
	}
	s.srv = srv
	s.port = srv.Addr().(*net.TCPAddr).Port
}

// Restart stops the server (clients see the connection drop) and starts it again on the
// same port with the same store, as a server restart in production would.
func (s *Server) Restart() {
	s.t.Helper()
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
	s.start()
}

// URL is the server's address, nats://127.0.0.1:PORT.
func (s *Server) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.port) }

// Stop shuts the server down for good (clients see it gone), before the test's cleanup
// would.
func (s *Server) Stop() {
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
}
