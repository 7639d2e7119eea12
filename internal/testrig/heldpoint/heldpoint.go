// Package heldpoint holds one caller at a point of the code under test,
// so that a test opens the window between two of its steps (a cache read
// and the origin fetch after it, say) on every run rather than by chance:
// the first caller to Pass the point after Arm waits there, having said
// so on Reached, until the test calls GoOn. Callers passing it otherwise
// go on at once.
package heldpoint

import "sync"

// Point is one point of the code under test, passed through a seam the
// test controls (a store, a clock or metrics it hands the code). The zero
// Point holds no one.
type Point struct {
	mu      sync.Mutex
	armed   bool
	reached chan struct{}
	goOn    chan struct{}
}

// Arm makes the next caller to Pass wait there. Reached and GoOn are of
// the last Arm.
func (p *Point) Arm() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed, p.reached, p.goOn = true, make(chan struct{}), make(chan struct{})
}

// Pass is called by the seam at the point: the first caller after Arm
// waits until GoOn; every other goes on at once.
func (p *Point) Pass() {
	p.mu.Lock()
	armed, reached, goOn := p.armed, p.reached, p.goOn
	p.armed = false
	p.mu.Unlock()
	if armed {
		close(reached)
		<-goOn
	}
}

// Reached is closed once the caller held by the last Arm waits at the
// point.
func (p *Point) Reached() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reached
}

// GoOn lets the caller held by the last Arm go on. It is called once
// for each Arm.
func (p *Point) GoOn() {
	p.mu.Lock()
	defer p.mu.Unlock()
	close(p.goOn)
}
