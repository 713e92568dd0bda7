// Package schedtest provides a FakeDevice for tests of code that drives the
// scheduler (package sched), as net/http/httptest does for HTTP: a
// sched.Device that runs every op's CPU function on the CPU, with streams,
// events, copy engines and sticky errors that behave like a GPU's where an
// executor can tell. It is for tests and demos only: no program should link
// it.
package schedtest
