package validity_test

import (
	"fmt"
	"time"

	"github.com/quorumlab/redlock/validity"
)

func ExampleBudget() {
	b := validity.Budget{TTL: 10 * time.Second, DriftFactor: 0.01, DriftConstant: 2 * time.Millisecond}
	if err := b.Validate(); err != nil {
		panic(err)
	}
	fmt.Println("majority of 5:", validity.Majority(5))
	fmt.Println("drift:", b.Drift())
	fmt.Println("validity after 120ms:", b.Validity(120*time.Millisecond))
	// Output:
	// majority of 5: 3
	// drift: 102ms
	// validity after 120ms: 9.778s
}
